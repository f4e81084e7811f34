import type { Agent } from '@agentlink/core';

/**
 * A caller that opens streams of large items, takes the first item of each and then stops reading: what it
 * holds from then on is its read-ahead plus its transport windows, the figure attack 8 bounds.
 */
export class SlowReader {
  private iterators: AsyncIterator<Uint8Array>[] = [];
  private firstItems = 0;

  constructor(private readonly agent: Agent) {}

  async start(address: string, streams: number, itemBytes: number): Promise<{ firstItems: number }> {
    const opened = Array.from({ length: streams }, async () => {
      const iterator = this.agent.stream<Uint8Array>(address, 'firehose', { itemBytes })[Symbol.asyncIterator]();
      this.iterators.push(iterator);
      const first = await iterator.next();
      if (!first.done && first.value.length === itemBytes) this.firstItems++;
    });
    await Promise.all(opened);
    return { firstItems: this.firstItems };
  }

  async stop(): Promise<{ stopped: number }> {
    const iterators = this.iterators.splice(0);
    await Promise.all(iterators.map((iterator) => iterator.return?.()));
    return { stopped: iterators.length };
  }

  stats(): { streams: number; firstItems: number } {
    return { streams: this.iterators.length, firstItems: this.firstItems };
  }
}
