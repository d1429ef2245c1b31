/** Client set-up lines when the kernel's hub does not send its own (older hubs, no hub loaded yet). Never a token. */
export interface ISetupLine {
  client: string;
  line: string;
}

export const SETUP_LINES: ISetupLine[] = [
  { client: 'Claude Code', line: 'claude mcp add notebook -- mcp-notebook bridge' },
  { client: 'Claude Desktop', line: 'mcp-notebook config claude-desktop --write' },
  { client: 'VS Code', line: 'mcp-notebook config vscode --write' },
  { client: 'Cursor', line: 'mcp-notebook config cursor --write' },
];
