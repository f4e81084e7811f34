import { describe, expect, it } from 'vitest';
import type { Priority } from '../src/index.js';
import { PRIORITY_WEIGHTS, WeightedPriorityQueue } from '../src/scheduler/priority-queue.js';

const levels: Priority[] = ['critical', 'high', 'normal', 'low'];

describe('WeightedPriorityQueue', () => {
  it('serves backlogged levels in proportion to their weights, FIFO within a level', () => {
    const queue = new WeightedPriorityQueue<{ level: Priority; n: number }>();
    for (const level of levels) for (let n = 0; n < 10_000; n++) queue.push({ level, n }, level);
    const served: Record<Priority, number[]> = { critical: [], high: [], normal: [], low: [] };
    for (let i = 0; i < 8500; i++) {
      const item = queue.shift()!;
      served[item.level].push(item.n);
    }
    const total = 64 + 16 + 4 + 1;
    for (const level of levels) {
      expect(served[level].length).toBeCloseTo((8500 * PRIORITY_WEIGHTS[level]) / total, -1);
      expect(served[level]).toEqual([...served[level]].sort((a, b) => a - b));
    }
  });

  it('a critical item overtakes a backlog at once; a low one waits a bounded number of turns', () => {
    const queue = new WeightedPriorityQueue<string>();
    for (let i = 0; i < 1000; i++) queue.push('low', 'low');
    queue.shift();
    queue.push('urgent', 'critical');
    expect(queue.shift()).toBe('urgent');
    const flooded = new WeightedPriorityQueue<string>();
    flooded.push('low', 'low');
    for (let i = 0; i < 1000; i++) flooded.push('critical', 'critical');
    let turns = 1;
    while (flooded.shift() !== 'low') turns++;
    expect(turns).toBeLessThanOrEqual(65);
  });

  it('skips entries no longer live', () => {
    const cancelled = new Set(['b']);
    const queue = new WeightedPriorityQueue<string>((item) => !cancelled.has(item));
    for (const item of ['a', 'b', 'c']) queue.push(item, 'normal');
    expect([queue.shift(), queue.shift(), queue.shift()]).toEqual(['a', 'c', undefined]);
    expect(queue.size).toBe(0);
  });
});
