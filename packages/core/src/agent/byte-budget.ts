import { AgentError } from '../errors.js';
import type { Channel } from '../channel.js';

/** Something holding bytes for a peer: an incomplete frame it sent, or a reply it does not read. */
export interface BudgetHolder {
  /** Drops what it holds and resets its stream: the budget chose it as the worst offender. */
  evict(reason: AgentError): void;
}

/**
 * Bytes a peer made us hold, counted per channel and, through the parent, for the whole agent: frames it started
 * and has not finished (transport windows bound what sits in transport buffers; this bounds what the frame
 * decoders gather beyond them), or replies it does not read. Past the limit the holder with the most bytes is
 * reset with RESOURCE_EXHAUSTED, and while the budget is exhausted new streams are refused.
 */
export class ByteBudget {
  private held = 0;
  /** Made when something first holds bytes: each channel has two budgets, and most idle peers hold nothing. */
  private holders: Map<BudgetHolder, number> | undefined;

  constructor(
    readonly limit: number,
    private readonly parent: ByteBudget | undefined,
    /** What is counted, for the reset's message, e.g. "unfinished frames". */
    private readonly what: string,
    /** Told of each eviction (the agent reports it as a refusal). */
    private readonly onEvict: (reason: AgentError) => void = () => undefined,
  ) {}

  /** Bytes held now. */
  get heldBytes(): number {
    return this.held;
  }

  /** True while this budget or its parent has no room: new streams are refused. */
  get exhausted(): boolean {
    return this.held >= this.limit || (this.parent?.exhausted ?? false);
  }

  /** Sets what `holder` holds now (0 releases it); evicts worst offenders while over a limit. */
  set(holder: BudgetHolder, bytes: number): void {
    const before = this.holders?.get(holder) ?? 0;
    if (bytes === before) return;
    if (bytes === 0) this.holders!.delete(holder); // it held bytes, so the map exists
    else (this.holders ??= new Map()).set(holder, bytes);
    this.adjust(bytes - before);
    this.enforce();
  }

  private adjust(delta: number): void {
    this.held += delta;
    this.parent?.adjust(delta);
  }

  private enforce(): void {
    while (this.held > this.limit) this.evictWorst(`more than ${this.limit} bytes of ${this.what} on one channel`);
    if (this.parent && this.parent.held > this.parent.limit) this.parent.evictAcrossChildren(this);
  }

  /** The parent is over: evict from the child that just grew (it is the one pushing), its worst holder first. */
  private evictAcrossChildren(child: ByteBudget): void {
    while (this.held > this.limit && (child.holders?.size ?? 0) > 0) child.evictWorst(`more than ${this.limit} bytes of ${this.what} in the agent`);
  }

  private evictWorst(why: string): void {
    if (!this.holders) return;
    let worst: BudgetHolder | undefined;
    let most = 0;
    for (const [holder, bytes] of this.holders) {
      if (bytes > most) {
        most = bytes;
        worst = holder;
      }
    }
    if (!worst) return;
    this.holders.delete(worst);
    this.adjust(-most);
    const reason = new AgentError('RESOURCE_EXHAUSTED', `stream reset: ${why}`);
    this.onEvict(reason);
    worst.evict(reason);
  }
}

/** One ByteBudget per channel (made on first use), all shares of one budget for the agent. */
export class ChannelBudgets {
  private readonly agent: ByteBudget;
  private readonly budgets = new WeakMap<Channel, ByteBudget>();

  constructor(
    private readonly perChannel: number,
    total: number,
    private readonly what: string,
    /** Told of each eviction on `channel` (the agent reports it as a refusal). */
    private readonly onEvict: (channel: Channel, reason: AgentError) => void,
  ) {
    this.agent = new ByteBudget(total, undefined, what);
  }

  for(channel: Channel): ByteBudget {
    let budget = this.budgets.get(channel);
    if (!budget) {
      budget = new ByteBudget(this.perChannel, this.agent, this.what, (reason) => this.onEvict(channel, reason));
      this.budgets.set(channel, budget);
    }
    return budget;
  }
}
