import { describe, expect, it } from 'vitest';
import type { ConformanceTarget } from '../target.js';
import { ATTACKS } from './attacks.js';
import { CHANNEL_BUDGET_BYTES, HOSTILE_BOUNDS, SUITE_SCALE } from './bounds.js';
import { measureAttack, type Measurement } from './measure.js';

/** What each attack must have achieved (nothing, mostly), beyond the bounds every attack is held to. */
const EXPECTATIONS: Record<string, (m: Measurement, target: ConformanceTarget) => void> = {
  'huge-frames': (m) => {
    const fates = (m.observed!['fates'] ?? {}) as Record<string, number>;
    const { streams, sentBytes } = SUITE_SCALE.hugeFrames;
    // The server keeps at most a budget's worth of these streams; the rest are reset as the worst offenders
    // or refused while the budget is exhausted.
    expect(fates['RESOURCE_EXHAUSTED'] ?? 0).toBeGreaterThanOrEqual(streams - Math.ceil(CHANNEL_BUDGET_BYTES / sentBytes) - 1);
    expect(Object.keys(fates).filter((fate) => fate !== 'RESOURCE_EXHAUSTED' && fate !== 'open')).toEqual([]);
    expect(m.during!.refusals['stream:budget'] ?? 0).toBeGreaterThanOrEqual(1);
  },
  'unread-streams': (m) => {
    expect(m.observed!['produced']).toBeGreaterThanOrEqual(SUITE_SCALE.unreadStreams.streams);
  },
  'unfinished-requests': (m) => {
    const { streams } = SUITE_SCALE.unfinishedRequests;
    expect(m.observed!['fates']).toEqual({ DEADLINE_EXCEEDED: streams, open: 0 });
    expect(m.during!.refusals['stream:request-timeout'] ?? 0).toBeGreaterThanOrEqual(streams);
  },
  'open-flood': (m, target) => {
    // The server never holds more streams than its limit (1024 at most on every channel).
    expect(m.during!.activeStreams).toBeLessThanOrEqual(1024 + 1);
    if (target.name === 'ws') {
      const refusals = m.during!.refusals;
      const traced = (refusals['stream:not-reading'] ?? 0) + (refusals['stream:max-streams'] ?? 0);
      expect(traced).toBeGreaterThan(0); // past the limit, every OPEN is a counted refusal (or the flooder is closed)
    }
  },
  'deep-nesting': (m) => {
    expect(m.observed!['answers']).toEqual({ PROTOCOL_ERROR: SUITE_SCALE.deepNesting.streams });
  },
  'prototype-keys': (m) => {
    const observed = m.observed as { malformed: string[]; noHandler: string[]; protoMetadata: string };
    expect(observed.malformed.every((answer) => answer === 'PROTOCOL_ERROR')).toBe(true);
    expect(observed.noHandler.every((answer) => answer === 'NO_HANDLER')).toBe(true);
    expect(['response', 'PROTOCOL_ERROR']).toContain(observed.protoMetadata);
    expect(m.after!.prototypeClean).toBe(true);
  },
  'abandoned-streams': (m) => {
    // Every stream was opened, unless the server ended the session of a peer resetting streams in bulk.
    if (m.observed!['closedByServer'] === undefined) expect(m.observed!['opened']).toBe(SUITE_SCALE.abandoned.streams);
    expect(m.observed!['serverActiveStreams']).toBe(0);
  },
  'slow-readers': (m) => {
    expect(m.observed!['firstItems']).toBe(SUITE_SCALE.slowReaders.streams);
  },
  'wrong-requests': (m, target) => {
    const observed = m.observed as Record<string, Record<string, number>>;
    expect(observed['refusedBeforeHandler']).toEqual({ NO_HANDLER: 100, PROTOCOL_ERROR: 200 });
    if (target.name === 'ws') {
      expect(observed['wrongPath']).toEqual({ 404: 20 });
      expect(observed['plainGet']).toEqual({ 426: 20 });
      expect(observed['post']).toEqual({ 426: 20 });
    }
    if (target.name === 'http2') {
      expect(observed['wrongPath']).toEqual({ refused: 50 });
      expect(observed['wrongMethod']).toEqual({ refused: 50 });
      expect(observed['putMethod']).toEqual({ refused: 50 });
      expect(observed['extraReverse']).toEqual({ refused: 100 });
    }
  },
};

/**
 * Issue #14's hostile peers, against every channel: each attack runs on a fresh server process while a
 * well-behaved agent calls it. Every case holds the server (for slow readers: the caller) to the memory bounds
 * of HOSTILE_BOUNDS during and after the attack, requires the well-behaved agent to be served throughout and the
 * server's streams to drain once the attacker left, and checks what the attacker got back.
 */
export function runHostileSuite(target: ConformanceTarget): void {
  describe(`hostile peers: ${target.name}`, () => {
    ATTACKS.forEach((attack, index) => {
      it(
        `${index + 1}. ${attack.title}: bounded memory, others served`,
        async () => {
          const m = await measureAttack(target, attack, SUITE_SCALE);
          expect(m.error).toBeUndefined();
          expect(m.victimAlive).toBe(true);
          expect(m.goodCallDuring).toBe('ok');
          expect(m.goodCallAfter).toBe('ok');
          expect(m.drained).toBe(true);
          const during = attack.key === 'slow-readers' ? HOSTILE_BOUNDS.callerGrowthBytes : HOSTILE_BOUNDS.serverGrowthDuringBytes;
          expect(m.peakRss - m.baseline.rss, 'peak RSS growth').toBeLessThan(during);
          expect(m.after!.rss - m.baseline.rss, 'RSS growth after the attack').toBeLessThan(HOSTILE_BOUNDS.serverGrowthAfterBytes);
          EXPECTATIONS[attack.key]!(m, target);
        },
        120_000,
      );
    });
  });
}
