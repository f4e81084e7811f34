/**
 * Told when a connection's open streams go from none to some (`busy`) and back to none (`idle`). A listener's
 * eviction only ever picks an idle connection: a call in flight is never cut.
 */
export interface ConnectionActivity {
  /** The connection's first stream opened (none was open). */
  busy(): void;
  /** The connection's last open stream ended. */
  idle(): void;
}

/**
 * How long a connection must have been idle before a full listener may close it for a newcomer (1 s): a healthy
 * connection between two calls is not churned. The QUIC engine uses the same (admission.rs, MIN_IDLE_BEFORE_EVICTION).
 */
export const MIN_IDLE_MS_BEFORE_EVICTION = 1000;

/** Groups of the top tier an eviction looks at, at most: bounded work per arrival, however many groups tie. */
const GROUPS_SCANNED = 8;

/** The connections of one address group, and which of them are idle, oldest idle first. */
class Group {
  count = 0;
  /** Idle connections in the order they became idle (a Set keeps insertion order): the first is idle the longest. */
  readonly idle = new Set<HeldConnection>();
  constructor(readonly key: string) {}
}

/** One admitted connection as the groups see it. */
export class HeldConnection {
  /** When it became idle (no streams open); undefined while busy. A connection starts idle: in handshake, no streams. */
  idleSince: number | undefined = undefined;
  released = false;
  /** Closes the connection when it is evicted (set by the listener). */
  close: (() => void) | undefined = undefined;
  constructor(readonly group: Group) {}
}

/**
 * The connections a listener holds, by address group, kept so that a full listener finds what to evict without a
 * scan: groups are indexed by how many connections they hold (the top count is known at once), and the groups that
 * have an idle connection are indexed the same way; each group's idle connections are in the order they became
 * idle. Every operation is O(1) but `victimFor`, which looks at no more than GROUPS_SCANNED groups.
 */
export class ConnectionGroups {
  private readonly groups = new Map<string, Group>();
  /** Groups with at least one idle connection, by how many connections they hold. */
  private readonly idleByCount = new Map<number, Set<Group>>();
  /** How many groups hold each count: the top count is the largest key. */
  private readonly groupsByCount = new Map<number, number>();
  private top = 0;

  /** Connections `key` holds now. */
  count(key: string): number {
    return this.groups.get(key)?.count ?? 0;
  }

  /** The most connections any one group holds. */
  get topCount(): number {
    return this.top;
  }

  add(key: string, now: number): HeldConnection {
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = new Group(key)));
    this.setCount(group, group.count + 1);
    const held = new HeldConnection(group);
    this.markIdle(held, now);
    return held;
  }

  remove(held: HeldConnection): void {
    if (held.released) return;
    held.released = true;
    this.markBusy(held);
    const group = held.group;
    this.setCount(group, group.count - 1);
    if (group.count === 0) this.groups.delete(group.key);
  }

  markBusy(held: HeldConnection): void {
    if (held.idleSince === undefined) return;
    held.idleSince = undefined;
    const group = held.group;
    group.idle.delete(held);
    if (group.idle.size === 0) this.unindexIdle(group, group.count);
  }

  markIdle(held: HeldConnection, now: number): void {
    if (held.idleSince !== undefined || held.released) return;
    held.idleSince = now;
    const group = held.group;
    group.idle.add(held);
    if (group.idle.size === 1) this.indexIdle(group, group.count);
  }

  /**
   * The connection a full listener closes for a newcomer from `key`, or undefined (the newcomer is refused): the
   * connection idle the longest, at least `minIdleMs`, of a group holding the most — and only when that group holds
   * at least two more than the newcomer's, so the move never leaves the newcomer's group larger than the one it
   * took from (no two groups can take one place back and forth).
   */
  victimFor(key: string, now: number, minIdleMs: number): HeldConnection | undefined {
    if (this.count(key) + 2 > this.top) return undefined;
    const candidates = this.idleByCount.get(this.top);
    if (!candidates) return undefined;
    let victim: HeldConnection | undefined;
    let scanned = 0;
    for (const group of candidates) {
      const oldest = group.idle.values().next().value!;
      if (now - oldest.idleSince! >= minIdleMs && (!victim || oldest.idleSince! < victim.idleSince!)) victim = oldest;
      if (++scanned === GROUPS_SCANNED) break;
    }
    return victim;
  }

  private setCount(group: Group, count: number): void {
    const before = group.count;
    if (group.idle.size > 0) this.unindexIdle(group, before);
    if (before > 0) this.countGroups(before, -1);
    group.count = count;
    if (count > 0) this.countGroups(count, +1);
    if (group.idle.size > 0) this.indexIdle(group, count);
    // Counts move by one: the top rises to a new count or, when its last group left it, falls by one.
    if (count > this.top) this.top = count;
    else if (before === this.top && !this.groupsByCount.has(before)) this.top = count;
  }

  private countGroups(count: number, delta: number): void {
    const groups = (this.groupsByCount.get(count) ?? 0) + delta;
    if (groups === 0) this.groupsByCount.delete(count);
    else this.groupsByCount.set(count, groups);
  }

  private indexIdle(group: Group, count: number): void {
    let tier = this.idleByCount.get(count);
    if (!tier) this.idleByCount.set(count, (tier = new Set()));
    tier.add(group);
  }

  /**
   * An emptied tier is kept, not deleted: a group alone at its count goes busy and idle with every call, and a new
   * Set per call would be garbage on the serving path. The tiers are bounded by the counts a group can hold
   * (maxConnectionsPerIp).
   */
  private unindexIdle(group: Group, count: number): void {
    this.idleByCount.get(count)?.delete(group);
  }
}
