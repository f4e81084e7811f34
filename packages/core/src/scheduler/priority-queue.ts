import { PRIORITIES, type Priority } from '../wire/messages.js';

/**
 * Share of dequeues each level gets while every level has work waiting: `critical` 64 of 85, `low` 1 of 85.
 * A stride scheduler turns the shares into an order, so `low` waits a bounded number of turns (at most ~85 per
 * item ahead of it) however much higher-priority work arrives, and `critical` overtakes all but a few.
 */
export const PRIORITY_WEIGHTS: Readonly<Record<Priority, number>> = { critical: 64, high: 16, normal: 4, low: 1 };

const STRIDE_UNIT = 64;

/** A FIFO that hands out its head in O(1) without Array#shift's copying. */
class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

interface Level<T> {
  readonly fifo: Fifo<T>;
  readonly stride: number;
  /** Virtual time at which this level is next served; the lowest pass among non-empty levels goes first. */
  pass: number;
}

/**
 * Four FIFO queues, one per priority, served by weight (stride scheduling). FIFO within a level. Entries that
 * were cancelled while waiting are skipped by `shift` when `isLive` says so (cheaper than removing them).
 */
export class WeightedPriorityQueue<T> {
  /**
   * Made at the first push: every channel's mux and every pool peer has a queue that most never use, and four
   * levels with their FIFOs are ~0.4 KiB each (docs/performance-log.md, "Server memory per idle peer").
   */
  private levels: Level<T>[] | undefined;
  private virtualTime = 0;
  private count = 0;

  constructor(private readonly isLive: (item: T) => boolean = () => true) {}

  /** Entries queued, including cancelled ones not yet skipped. */
  get size(): number {
    return this.count;
  }

  push(item: T, priority: Priority): void {
    this.levels ??= PRIORITIES.map((p) => ({ fifo: new Fifo<T>(), stride: STRIDE_UNIT / PRIORITY_WEIGHTS[p], pass: 0 }));
    const level = this.levels[PRIORITIES.indexOf(priority)]!;
    // A level that was idle rejoins at the current virtual time: it gets no credit for the time it had no work.
    if (level.fifo.size === 0) level.pass = Math.max(level.pass, this.virtualTime);
    level.fifo.push(item);
    this.count++;
  }

  shift(): T | undefined {
    const levels = this.levels;
    if (!levels) return undefined;
    for (;;) {
      let next: Level<T> | undefined;
      for (const level of levels) {
        if (level.fifo.size > 0 && (next === undefined || level.pass < next.pass)) next = level;
      }
      if (!next) return undefined;
      const item = next.fifo.shift()!;
      this.count--;
      if (!this.isLive(item)) continue;
      this.virtualTime = next.pass;
      next.pass += next.stride;
      return item;
    }
  }
}
