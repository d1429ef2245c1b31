/** What the panel and the status item share: they follow one notebook's hub connection. */
import { Widget } from '@lumino/widgets';

import { HubConnection } from './connection';

export abstract class ConnectionView extends Widget {
  /** Show another notebook's connection (null: no notebook is current). */
  setConnection(conn: HubConnection | null): void {
    if (conn === this.conn) {
      return;
    }
    this.conn?.changed.disconnect(this.render, this);
    this.conn = conn;
    conn?.changed.connect(this.render, this);
    this.render();
  }

  /** Draw the current state (called on every change of the connection). */
  protected abstract render(): void;

  protected conn: HubConnection | null = null;
}
