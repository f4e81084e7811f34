import { createAgent, type Agent, type AgentError } from '@agentlink/core';
import { loadFactory, type ConformanceTarget } from '../target.js';
import { AgentProcess, type AgentProcessStats } from './agent-handle.js';
import type { Attack } from './attacks.js';
import { HOSTILE_BOUNDS, type AttackScale } from './bounds.js';

/** One attack on one channel, measured: the victim's memory before, at its peak and after, and what everyone saw. */
export interface Measurement {
  attack: string;
  /** The victim once warmed up, after garbage collection. */
  baseline: AgentProcessStats;
  /** The victim with the attack in place. */
  during?: AgentProcessStats;
  /** The highest RSS the victim reached, sampled every 10 ms from the baseline on. */
  peakRss: number;
  /** The victim after the attacker left and its streams drained, after garbage collection. */
  after?: AgentProcessStats;
  /** What the attacker saw. */
  observed?: Record<string, unknown>;
  /** A well-behaved peer's calls while the attack was in place and after it: 'ok' or the error code. */
  goodCallDuring?: string;
  goodCallAfter?: string;
  /** Whether the victim's streams returned to 0 once the attacker left. */
  drained?: boolean;
  victimAlive: boolean;
  /** Why the measurement stopped early, if it did. */
  error?: string;
}

/**
 * An attack that cannot even get in place (a step that hangs) is a finding too, not a hung suite. Generous: CI
 * runs the three channels' suites at once on two cores, and 10,000 QUIC streams then take tens of seconds.
 */
const MOUNT_TIMEOUT_MS = 75_000;

async function withinMs<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function goodCall(agent: Agent, address: string): Promise<string> {
  try {
    const reply = await agent.send(address, 'echo', 'still served', { timeoutMs: 5000 });
    return reply === 'still served' ? 'ok' : `wrong reply ${JSON.stringify(reply)}`;
  } catch (error) {
    return (error as AgentError).code ?? String(error);
  }
}

/**
 * Runs one attack against a fresh victim process (so no attack inherits another's memory) while a well-behaved
 * agent in this process calls it, and measures. Never throws: a failure is reported in `error`.
 */
export async function measureAttack(target: ConformanceTarget, attack: Attack, scale: AttackScale): Promise<Measurement> {
  const factory = await loadFactory(target);
  const agentOptions = { requestTimeoutMs: HOSTILE_BOUNDS.requestTimeoutMs, ...attack.agentOptions };
  const victim = await AgentProcess.start(target, agentOptions);
  const others: AgentProcess[] = [];
  const good = await createAgent({ channels: [factory(target.dialOptions ?? {})] });
  let measurement: Measurement | undefined;
  try {
    if ((await goodCall(good, victim.address)) !== 'ok') throw new Error('the victim does not serve before the attack');
    const baseline = await victim.collectedStats();
    await victim.resetPeak();
    measurement = { attack: attack.key, baseline, peakRss: baseline.rss, victimAlive: true };
    const inPlace = await withinMs(MOUNT_TIMEOUT_MS, 'the attack getting in place', attack.mount({
      target,
      factory,
      victim,
      scale,
      spawn: async () => {
        const other = await AgentProcess.start(target, agentOptions);
        others.push(other);
        return other;
      },
    }));
    measurement.observed = inPlace.observed;
    measurement.goodCallDuring = await goodCall(good, victim.address);
    measurement.during = await victim.stats();
    await inPlace.release();
    try {
      await victim.waitFor('the victim draining its streams', (s) => s.activeStreams === 0, HOSTILE_BOUNDS.reactionMs);
      measurement.drained = true;
    } catch {
      measurement.drained = false;
    }
    measurement.goodCallAfter = await goodCall(good, victim.address);
    measurement.after = await victim.collectedStats();
    measurement.peakRss = measurement.after.peakRss;
  } catch (error) {
    measurement ??= { attack: attack.key, baseline: undefined as never, peakRss: 0, victimAlive: victim.alive };
    measurement.error = (error as Error).message;
    if (victim.alive) measurement.peakRss = (await victim.stats().catch(() => undefined))?.peakRss ?? measurement.peakRss;
  } finally {
    measurement!.victimAlive = victim.alive;
    await good.close();
    await Promise.all([victim.stop(), ...others.map((o) => o.stop())]);
  }
  return measurement!;
}
