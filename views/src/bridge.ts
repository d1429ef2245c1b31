// The view's only way to the hub: the host's bridge (tool calls, resource reads). No URL, no token.
import { App } from '@modelcontextprotocol/ext-apps';
import { ModelContext } from './context';

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface ContentItem {
  uri: string;
  mimeType?: string;
  text?: string;
  blob?: string;
  _meta?: Record<string, Json>;
}

export class Bridge {
  /** What the views share with the assistant, where the host takes it (ui/update-model-context). */
  readonly context: ModelContext;

  constructor(readonly app: App) {
    this.context = new ModelContext(app);
  }

  /** Call a hub tool; an isError result becomes a thrown Error with the tool's text. */
  async tool(name: string, args: Record<string, Json>): Promise<Json> {
    const result = await this.app.callServerTool({ name, arguments: args });
    if (result.isError) {
      const text = (result.content ?? []).map((c: Json) => (c.type === 'text' ? c.text : '')).join(' ');
      throw new Error(text || `${name} failed`);
    }
    return result;
  }

  /** Read a resource: resources/read when the host forwards it, else the read_resource tool. */
  async read(uri: string): Promise<ContentItem[]> {
    if (this.app.getHostCapabilities()?.serverResources) {
      const result = await this.app.readServerResource({ uri });
      return result.contents as ContentItem[];
    }
    const result = await this.tool('read_resource', { uri });
    const contents = result.structuredContent?.contents;
    if (!Array.isArray(contents)) throw new Error('the host returned no structured contents for read_resource');
    // The text is sent once, in content (for the model): each structured item names the content item holding it.
    return contents.map((item: Json) => {
      const part = typeof item.content === 'number' ? result.content?.[item.content] : undefined;
      if (part?.type === 'text') return { ...item, text: part.text };
      if (part?.type === 'image') return { ...item, blob: part.data };
      if (part?.type === 'resource') return { ...item, ...part.resource };
      return item;
    }) as ContentItem[];
  }
}
