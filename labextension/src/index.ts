/**
 * mcp-notebook for JupyterLab: one HubConnection per open notebook (live document and active cell
 * pushed to the kernel's hub), a side panel and a status-bar item for the current notebook.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';

import { HubConnection } from './connection';
import { reportFocus } from './focus';
import { HubPanel } from './panel';
import { ServerDocument } from './serverdoc';
import { HubStatus } from './status';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
  '<circle cx="12" cy="12" r="3"/><circle cx="4.5" cy="5" r="2"/><circle cx="19.5" cy="5" r="2"/>' +
  '<circle cx="12" cy="21" r="2"/><path d="M6 6.2l4.3 4 1-1-4.3-4zM18 6.2l-4.3 4-1-1 4.3-4zM11.3 15h1.4v4h-1.4z"/></g></svg>';

const hubIcon = new LabIcon({ name: 'mcp-notebook:hub', svgstr: ICON_SVG });

namespace CommandIDs {
  export const openPanel = 'mcp-notebook:open-panel';
  export const load = 'mcp-notebook:load';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'mcp-notebook:plugin',
  description: 'The MCP hub of the notebook: live document, active cell, hub panel and status.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, IStatusBar, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
  ) => {
    const connections = new Map<NotebookPanel, HubConnection>();
    const panel = new HubPanel();
    panel.title.icon = hubIcon;
    app.shell.add(panel, 'right', { rank: 900 });

    const current = (): HubConnection | null =>
      (tracker.currentWidget && connections.get(tracker.currentWidget)) || null;

    tracker.widgetAdded.connect((_, nbPanel) => {
      const conn = new HubConnection(nbPanel);
      const serverDoc = new ServerDocument(nbPanel, conn); // a kernel without a hub: the server's route
      connections.set(nbPanel, conn);
      nbPanel.disposed.connect(() => {
        connections.delete(nbPanel);
        serverDoc.dispose();
        conn.dispose();
        if (!tracker.currentWidget) {
          follow();
        }
      });
      follow();
    });

    const openPanel = () => {
      if (labShell) {
        labShell.activateById(panel.id);
      } else {
        app.shell.activateById(panel.id);
      }
    };
    const status = new HubStatus(openPanel);
    const follow = () => {
      const conn = current();
      panel.setConnection(conn);
      status.setConnection(conn);
      conn?.focus();
      void reportFocus(tracker.currentWidget);
    };
    tracker.currentChanged.connect(follow);
    // a notebook whose kernel starts or changes while it has the focus
    tracker.widgetAdded.connect((_, nbPanel) => {
      nbPanel.sessionContext.kernelChanged.connect(() => {
        if (tracker.currentWidget === nbPanel) {
          void reportFocus(nbPanel);
        }
      });
    });

    // A cell that may have loaded the hub (%load_ext mcp_notebook) makes its notebook look again.
    NotebookActions.executed.connect((_, { notebook, cell }) => {
      for (const [nbPanel, conn] of connections) {
        if (nbPanel.content === notebook) {
          conn.cellExecuted(cell.model.sharedModel.getSource(), cell.model.id);
        }
      }
    });

    app.commands.addCommand(CommandIDs.openPanel, {
      label: 'Show the MCP hub panel',
      execute: openPanel,
    });
    app.commands.addCommand(CommandIDs.load, {
      label: 'Load mcp-notebook in this kernel',
      isEnabled: () => current()?.status === 'absent',
      execute: () => current()?.load(),
    });
    palette?.addItem({ command: CommandIDs.openPanel, category: 'mcp-notebook' });
    palette?.addItem({ command: CommandIDs.load, category: 'mcp-notebook' });

    if (statusBar) {
      statusBar.registerStatusItem('mcp-notebook:status', {
        item: status,
        align: 'left',
        rank: 4,
        isActive: () => tracker.currentWidget !== null,
      });
    }
    follow();
  },
};

export default plugin;
