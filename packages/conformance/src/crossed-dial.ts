import diagnostics from 'node:diagnostics_channel';
import type { Agent } from '@agentlink/core';
import type { Channel } from '@agentlink/core/transport';

/** What a crossed dial left on one side: the channels to the other agent that opened, and those that closed. */
export interface CrossedDialSide {
  opened: Channel[];
  closed: Channel[];
}

/** What a crossed dial left: the replies of the two calls that made it, and each side's channels. */
export interface CrossedDial {
  replies: [unknown, unknown];
  onA: CrossedDialSide;
  onB: CrossedDialSide;
}

/**
 * Makes `a` and `b`, which know each other's address and have no channel yet, call `echo` on each other in the
 * same turn, so each dials the other, and resolves once both pools settled the crossing: on each side both
 * dials' channels opened and one channel to the other agent closed.
 *
 * Waiting for the calls' replies is not enough: both may ride the first channel up while the other dial is still
 * in flight, and that channel lands afterwards (QUIC on loopback, 1 run in ~10). Waiting for "one channel on each
 * side" is not either: that holds before the second one lands. So this waits on the pools' own events.
 */
export async function crossedDial(a: Agent, b: Agent): Promise<CrossedDial> {
  const onA: CrossedDialSide = { opened: [], closed: [] };
  const onB: CrossedDialSide = { opened: [], closed: [] };
  // Both agents live in this process: a channel to B is A's, a channel to A is B's.
  const sideOf = (channel: Channel): CrossedDialSide | undefined => (channel.peer === b.id ? onA : channel.peer === a.id ? onB : undefined);
  const settled = (side: CrossedDialSide): boolean =>
    side.opened.some((c) => c.initiator === 'local') && side.opened.some((c) => c.initiator === 'remote') && side.closed.length > 0;
  let done!: () => void;
  const bothSettled = new Promise<void>((resolve) => (done = resolve));
  const record = (list: 'opened' | 'closed') => (message: unknown): void => {
    const { channel } = message as { channel: Channel };
    sideOf(channel)?.[list].push(channel);
    if (settled(onA) && settled(onB)) done();
  };
  const onOpen = record('opened');
  const onClose = record('closed');
  diagnostics.subscribe('agentlink:channel:open', onOpen);
  diagnostics.subscribe('agentlink:channel:close', onClose);
  try {
    const replies = await Promise.all([a.send(b.id, 'echo', 'from a'), b.send(a.id, 'echo', 'from b')]);
    await bothSettled;
    return { replies, onA, onB };
  } finally {
    diagnostics.unsubscribe('agentlink:channel:open', onOpen);
    diagnostics.unsubscribe('agentlink:channel:close', onClose);
  }
}

/**
 * Resolves with the first channel from `agent` to `peer` whose initiator is `initiator` to open (or the one
 * already in its pool): the pool's own event, published once the channel is in the pool.
 */
export function channelOpened(agent: Agent, peer: Agent, initiator: Channel['initiator']): Promise<Channel> {
  const present = agent.channels(peer.id).find((c) => c.initiator === initiator);
  if (present) return Promise.resolve(present);
  return new Promise((resolve) => {
    const onOpen = (message: unknown): void => {
      const { channel } = message as { channel: Channel };
      // Both agents live in this process: `agent`'s channel to `peer` names `peer`, `peer`'s names `agent`.
      if (channel.peer !== peer.id || channel.initiator !== initiator || !agent.channels(peer.id).includes(channel)) return;
      diagnostics.unsubscribe('agentlink:channel:open', onOpen);
      resolve(channel);
    };
    diagnostics.subscribe('agentlink:channel:open', onOpen);
  });
}
