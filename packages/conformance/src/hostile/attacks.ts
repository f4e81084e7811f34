import { AgentError, type AgentOptions } from '@agentlink/core';
import { FrameDecoder, decodePayload, type ChannelStream, type WireMessage } from '@agentlink/core/transport';
import { once } from 'node:events';
import type { ConformanceTarget, TransportFactory } from '../target.js';
import type { AgentProcess } from './agent-handle.js';
import { CHANNEL_BUDGET_BYTES, HOSTILE_BOUNDS, type AttackScale } from './bounds.js';
import { deepArray, pack, requestWithRawBody } from './msgpack-bytes.js';
import { http2Outcome, rawHttp2Session, type Http2Outcome } from './raw-http2.js';
import { RawPeer, fateOf, frameHeader, rawFrame, requestFrame, splitAddress, tally, type StreamFate } from './raw-peer.js';
import { RawWebSocket } from './raw-websocket.js';

/** What an attack is given. */
export interface AttackEnv {
  target: ConformanceTarget;
  factory: TransportFactory;
  /** The agent process whose memory is measured: the server attacked (or, for slow readers, the caller). */
  victim: AgentProcess;
  scale: AttackScale;
  /** Starts another agent process, stopped with the victim (slow readers need a server to read from). */
  spawn(): Promise<AgentProcess>;
}

/** An attack in place: what the attacker saw so far, and how to end it (the attacker leaves). */
export interface AttackInPlace {
  observed: Record<string, unknown>;
  release(): Promise<void>;
}

export interface Attack {
  /** Stable key for tables, e.g. "huge-frames". */
  key: string;
  title: string;
  /** Options for the victim agent beyond the suite's (HOSTILE_BOUNDS.requestTimeoutMs). */
  agentOptions?: Partial<AgentOptions>;
  /** Mounts the attack and resolves once it is fully in place (the victim holds whatever it will hold). */
  mount(env: AttackEnv): Promise<AttackInPlace>;
}

const MiB = 1024 * 1024;

/** Polls `condition` until it holds; throws `what` after `ms`. A bounded wait, never a fixed sleep. */
async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  ms = HOSTILE_BOUNDS.reactionMs,
  state?: () => string,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (let delay = 5; !(await condition()); delay = Math.min(delay * 2, 100)) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms${state ? ` (${state()})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** Fates of streams as they resolve, readable at any time. */
class Fates {
  readonly settled: StreamFate[] = [];
  private pending = 0;
  watch(stream: ChannelStream): void {
    this.pending++;
    void fateOf(stream).then((fate) => {
      this.pending--;
      this.settled.push(fate);
    });
  }
  get open(): number {
    return this.pending;
  }
  summary(): Record<string, number> {
    return { ...tally(this.settled), open: this.pending };
  }
}

/** Writes, ignoring a rejection (the stream was reset: its fate says so). Resolves false when it failed. */
async function tryWrite(stream: ChannelStream, bytes: Uint8Array): Promise<boolean> {
  try {
    await stream.write(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Reads a whole reply (every frame until the end) or the reset code; never rejects. */
async function replyOf(stream: ChannelStream): Promise<{ messages: WireMessage[]; fate: StreamFate }> {
  const decoder = new FrameDecoder();
  const messages: WireMessage[] = [];
  try {
    for (let chunk = await stream.read(); chunk !== undefined; chunk = await stream.read()) {
      for (const payload of decoder.push(chunk)) messages.push(decodePayload(payload));
    }
    return { messages, fate: 'ended' };
  } catch (error) {
    return { messages, fate: error instanceof AgentError ? error.code : String(error) };
  }
}

/** What a stream's answer amounts to: the error code of an `error` message or of a reset, or the message type. */
function answerOf(reply: { messages: WireMessage[]; fate: StreamFate }): string {
  const error = reply.messages.find((m) => m.type === 'error');
  if (error?.type === 'error') return error.code;
  if (reply.fate !== 'ended') return reply.fate;
  return reply.messages[0]?.type ?? 'nothing';
}

// ---- 1. huge declared lengths on many streams ----------------------------------------------------------------

const hugeFrames: Attack = {
  key: 'huge-frames',
  title: 'huge declared lengths on many streams',
  // A request timeout beyond the test's 120 s: the bytes must be held by the budget, not cut off by the timeout.
  // (With the default 10 s, a loaded machine — two CPU burners — took longer than that to put the attack in
  // place, and 3 of the streams past the budget ended DEADLINE_EXCEEDED instead of being reset by the budget.)
  agentOptions: { requestTimeoutMs: 180_000 },
  async mount({ factory, target, victim, scale }) {
    const { streams, declaredBytes, sentBytes } = scale.hugeFrames;
    const peer = await RawPeer.dial(factory, target, victim.address);
    const fates = new Fates();
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const call = requestFrame('wait-for-abort', null);
    let written = 0;
    await Promise.all(
      Array.from({ length: streams }, async (_, i) => {
        const stream = await peer.openStream();
        fates.watch(stream);
        // Half declare the request itself huge; half make a call that waits, then send a huge frame inside it.
        if (i % 2 === 1 && !(await tryWrite(stream, call))) return;
        if (!(await tryWrite(stream, frameHeader(declaredBytes)))) return;
        for (let sent = 0; sent < sentBytes; sent += chunk.length) {
          if (!(await tryWrite(stream, chunk))) return;
          written += chunk.length;
        }
      }),
    );
    // The writes resolve as the transport takes them, before the server read them all: in place once the server
    // has decided about every stream it cannot hold, i.e. at most a budget's worth is still open. (Waiting for
    // the fates to stop changing for 5 polls, ~155 ms, measured a server that was merely slow under two CPU
    // burners: 15 resets where 31 came later.)
    const held = Math.ceil(CHANNEL_BUDGET_BYTES / sentBytes) + 1;
    await until('the server deciding about the streams past its budget', () => fates.open <= held);
    return { observed: { fates: fates.summary(), writtenBytes: written }, release: () => peer.leave() };
  },
};

// ---- 2. large items nobody reads (HTTP/2: a zero flow-control window) ----------------------------------------

const unreadStreams: Attack = {
  key: 'unread-streams',
  title: 'stream calls never read (HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE=0)',
  async mount({ factory, target, victim, scale }) {
    const { streams, itemBytes } = scale.unreadStreams;
    const request = requestFrame('firehose', { itemBytes }, 'stream');
    const before = (await victim.stats()).produced;
    let release: () => Promise<void>;
    if (target.name === 'http2') {
      const session = await rawHttp2Session(splitAddress(victim.address).url, { initialWindowSize: 0 });
      for (let i = 0; i < streams; i++) {
        const stream = session.request({ ':method': 'POST', ':path': '/agentlink' });
        stream.on('error', () => undefined);
        stream.write(request);
      }
      release = async () => void session.destroy();
    } else {
      const peer = await RawPeer.dial(factory, target, victim.address);
      await Promise.all(Array.from({ length: streams }, async () => tryWrite(await peer.openStream(), request)));
      release = () => peer.leave();
    }
    // In place once every handler has produced its first item: each now waits for credit that never comes.
    const stats = await victim.waitFor('every unread stream producing', (s) => s.produced - before >= streams, HOSTILE_BOUNDS.reactionMs);
    return { observed: { produced: stats.produced - before }, release };
  },
};

// ---- 3. requests that never finish ---------------------------------------------------------------------------

const unfinishedRequests: Attack = {
  key: 'unfinished-requests',
  title: 'requests that never finish',
  async mount({ factory, target, victim, scale }) {
    const { streams } = scale.unfinishedRequests;
    const peer = await RawPeer.dial(factory, target, victim.address);
    const fates = new Fates();
    const partial = requestFrame('echo', 'x'.repeat(100));
    await Promise.all(
      Array.from({ length: streams }, async (_, i) => {
        const stream = await peer.openStream();
        fates.watch(stream);
        // Half stop inside the length header, half inside the payload.
        await tryWrite(stream, i % 2 === 0 ? partial.subarray(0, 2) : partial.subarray(0, 20));
      }),
    );
    await until('every unfinished request reset', () => fates.open === 0);
    return { observed: { fates: fates.summary() }, release: () => peer.leave() };
  },
};

// ---- 4. streams past the limit from a peer that does not read ------------------------------------------------

const MUX_OPEN = 0;

const openFlood: Attack = {
  key: 'open-flood',
  title: 'streams past the limit from a peer that does not read',
  async mount(env) {
    return env.target.name === 'ws' ? muxOpenFlood(env) : streamFlood(env);
  },
};

/** ws: OPEN frames on a socket the attacker never reads, so every refusal the server queues stays unsent. */
async function muxOpenFlood({ victim, scale }: AttackEnv): Promise<AttackInPlace> {
  const url = splitAddress(victim.address).url;
  const ws = await RawWebSocket.connect(url, url.pathname);
  if (ws.status !== 101) throw new Error(`the upgrade was answered ${ws.status}`);
  let sent = 0;
  const batch = 500;
  const total = scale.openFlood.streams;
  const closed = new Promise<false>((resolve) => ws.socket.once('close', () => resolve(false)));
  while (sent < total && !ws.closed) {
    const frames: Buffer[] = [];
    for (let i = 0; i < batch && sent < total; i++, sent++) {
      const open = Buffer.alloc(5);
      open[0] = MUX_OPEN;
      open.writeUInt32BE(2 * sent + 1, 1); // the dialer's odd ids
      frames.push(RawWebSocket.frame(open));
    }
    if (!ws.socket.write(Buffer.concat(frames))) {
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([
        once(ws.socket, 'drain').then(() => true),
        closed,
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), HOSTILE_BOUNDS.reactionMs))),
      ]);
      clearTimeout(timer);
      if (!drained) break;
    }
  }
  // In place once the server dealt with every OPEN (accepted then timed out, or refused), or closed us.
  await victim.waitFor(
    'the server dealing with every OPEN (refusals counted) or closing the flooder',
    (s) =>
      ws.closed ||
      streamRefusals(s.refusals, 'not-reading') > 0 ||
      streamRefusals(s.refusals, 'max-streams') + streamRefusals(s.refusals, 'request-timeout') >= sent,
    HOSTILE_BOUNDS.reactionMs,
  );
  return { observed: { sent, closedByServer: ws.closed }, release: async () => ws.destroy() };
}

/** Streams the victim refused (or reset) for `reason` so far. */
function streamRefusals(refusals: Record<string, number>, reason: string): number {
  return refusals[`stream:${reason}`] ?? 0;
}

/** http2, quic: streams opened as fast as the channel lets, each asking for a pong it never reads. */
async function streamFlood({ factory, target, victim, scale }: AttackEnv): Promise<AttackInPlace> {
  const peer = await RawPeer.dial(factory, target, victim.address);
  const ping = rawFrame(pack([7, 1]));
  let opened = 0;
  const total = Math.min(scale.openFlood.streams, 2000);
  // Held until the attacker leaves, as a real one would: an unreferenced QUIC stream is collected, and quinn
  // finishes a dropped stream, which hands its credit back and lets more through than the limit.
  const held: ChannelStream[] = [];
  for (let i = 0; i < total; i++) {
    void peer
      .openStream()
      .then((stream) => (held.push(stream), tryWrite(stream, ping)))
      .then(() => void opened++, () => undefined);
  }
  // In place once the streams the channel let through are all open at the server, or already reset by its
  // request timeout (500 ms in the suite: on a loaded machine the first are reset before the last have opened),
  // and no more get through.
  const timedOutBefore = streamRefusals((await victim.stats()).refusals, 'request-timeout');
  let last = -1;
  let stable = 0;
  let atServer = 0;
  let lastRefusals: Record<string, number> = {};
  await until(
    'the stream flood settling',
    async () => {
      const s = await victim.stats();
      atServer = s.activeStreams;
      lastRefusals = s.refusals;
      const dealtWith = s.activeStreams + streamRefusals(s.refusals, 'request-timeout') - timedOutBefore;
      stable = opened === last && dealtWith >= opened ? stable + 1 : 0;
      last = opened;
      return opened === total ? dealtWith >= opened : stable >= 3;
    },
    HOSTILE_BOUNDS.reactionMs,
    () => `opened ${opened} of ${total}, ${atServer} streams at the server, refusals ${JSON.stringify(lastRefusals)}`,
  );
  return { observed: { attempted: total, opened }, release: () => (held.length = 0, peer.leave()) };
}

// ---- 5. deep nesting -----------------------------------------------------------------------------------------

const deepNesting: Attack = {
  key: 'deep-nesting',
  title: '100,000-deep msgpack',
  // The decoder's verdict is what is asserted: the suite's 500 ms request timeout could refuse a frame first on a
  // loaded machine (the suspected cause of one QUIC failure at load 18, whose report was cut off).
  agentOptions: { requestTimeoutMs: 60_000 },
  async mount({ factory, target, victim, scale }) {
    const { depth, streams } = scale.deepNesting;
    const peer = await RawPeer.dial(factory, target, victim.address);
    const deep = deepArray(depth);
    // Half nest the message itself, half a request's body.
    const frames = [rawFrame(deep), rawFrame(requestWithRawBody('echo', deep))];
    const answers = await Promise.all(
      Array.from({ length: streams }, async (_, i) => {
        const stream = await peer.openStream();
        const reply = replyOf(stream);
        await tryWrite(stream, frames[i % 2]!);
        return answerOf(await reply);
      }),
    );
    return { observed: { answers: tally(answers) }, release: () => peer.leave() };
  },
};

// ---- 6. prototype keys ---------------------------------------------------------------------------------------

/** Messages whose type or keys name Object.prototype's members. */
export const PROTOTYPE_MESSAGES = {
  /** Must be refused as malformed. */
  malformed: [
    pack(['constructor']),
    pack(['__proto__']),
    pack(['toString']),
    pack(['hasOwnProperty', 1]),
    pack(['valueOf', 'x']),
    pack({ entries: [['__proto__', { entries: [['polluted', true]] }]] }),
    pack({ entries: [['0', 1], ['length', 7]] }),
  ],
  /** Well-formed requests for methods named like prototype members: nobody serves them. */
  noHandler: ['constructor', '__proto__', 'toString', 'hasOwnProperty', '__defineGetter__'].map((method) =>
    pack([1, method, null, 2, { entries: [] }, null, 0]),
  ),
  /** A request whose metadata has a `__proto__` key: served or refused, but never polluting. */
  protoMetadata: pack([1, 'context', null, 2, { entries: [['__proto__', 'polluted']] }, null, 0]),
};

const prototypeKeys: Attack = {
  key: 'prototype-keys',
  title: 'prototype-key messages',
  // As for deep nesting: each answer must be the decoder's or the router's, never the request timeout's.
  agentOptions: { requestTimeoutMs: 60_000 },
  async mount({ factory, target, victim }) {
    const peer = await RawPeer.dial(factory, target, victim.address);
    const ask = async (payload: Buffer): Promise<string> => {
      const stream = await peer.openStream();
      const reply = replyOf(stream);
      await tryWrite(stream, rawFrame(payload));
      return answerOf(await reply);
    };
    const malformed = await Promise.all(PROTOTYPE_MESSAGES.malformed.map(ask));
    const noHandler = await Promise.all(PROTOTYPE_MESSAGES.noHandler.map(ask));
    const protoMetadata = await ask(PROTOTYPE_MESSAGES.protoMetadata);
    return { observed: { malformed, noHandler, protoMetadata }, release: () => peer.leave() };
  },
};

// ---- 7. streams opened and abandoned -------------------------------------------------------------------------

const abandoned: Attack = {
  key: 'abandoned-streams',
  title: '10,000 streams opened and abandoned',
  async mount({ factory, target, victim, scale }) {
    const { streams, concurrency } = scale.abandoned;
    const peer = await RawPeer.dial(factory, target, victim.address);
    const partial = requestFrame('echo', 'y'.repeat(200)).subarray(0, 50);
    const cancel = new AgentError('CANCELLED', 'abandoned');
    let opened = 0;
    // Streams left as they are stay referenced until the attacker leaves: a collected QUIC stream is finished by
    // quinn, which would end it cleanly instead of leaving it to the request timeout.
    const left: ChannelStream[] = [];
    // A server may end the session of a peer that resets streams in bulk (node:http2 answers a rapid reset with
    // GOAWAY): that is a defence, and the attack stops there.
    let closedByServer: string | undefined;
    for (let base = 0; base < streams && !closedByServer; base += concurrency) {
      await Promise.all(
        Array.from({ length: Math.min(concurrency, streams - base) }, async (_, i) => {
          let stream: ChannelStream;
          try {
            stream = await peer.openStream();
          } catch (error) {
            closedByServer ??= (error as AgentError).message;
            return;
          }
          opened++;
          const variant = (base + i) % 3;
          if (variant !== 0) await tryWrite(stream, partial); // 0: nothing at all
          if (variant !== 2) stream.reset(cancel);
          else left.push(stream); // left as it is, for the request timeout to reap
        }),
      );
    }
    // Nothing leaks while the attacker is still connected: reset streams are freed, left ones time out.
    // Thrice the usual bound: 10,000 streams take the QUIC engine tens of seconds when CI runs every suite at once.
    const stats = await victim.waitFor('the abandoned streams freed at the server', (s) => s.activeStreams === 0, 3 * HOSTILE_BOUNDS.reactionMs);
    return { observed: { opened, closedByServer, serverActiveStreams: stats.activeStreams }, release: () => (left.length = 0, peer.leave()) };
  },
};

// ---- 8. slow readers of large items (the caller is measured) -------------------------------------------------

const slowReaders: Attack = {
  key: 'slow-readers',
  title: 'a caller reading many streams of 1 MiB items slowly (caller measured)',
  async mount({ victim, scale, spawn }) {
    const { streams, itemBytes } = scale.slowReaders;
    const producer = await spawn();
    const started = await victim.request<{ firstItems: number }>('slow-read', { address: producer.address, streams, itemBytes });
    // In place once the producers stalled: the caller holds all it will hold. (Each producer waits for credit.)
    let last = -1;
    let stable = 0;
    await until('the producers stalling', async () => {
      const { produced } = await producer.stats();
      stable = produced === last ? stable + 1 : 0;
      last = produced;
      return stable >= 3;
    });
    return {
      observed: { firstItems: started.firstItems, produced: last },
      release: async () => {
        await victim.request('stop-reading');
      },
    };
  },
};

// ---- 9. wrong paths and methods, extra reverse streams, streams refused before a handler ---------------------

const wrongRequests: Attack = {
  key: 'wrong-requests',
  title: 'wrong paths/methods, extra reverse streams, streams refused before any handler',
  async mount(env) {
    const { factory, target, victim } = env;
    const peer = await RawPeer.dial(factory, target, victim.address);
    const refusedBeforeHandler = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const stream = await peer.openStream();
        const reply = replyOf(stream);
        // Unknown methods, a stream that starts with an item, and garbage.
        const frame = [requestFrame('no-such-method', i), rawFrame(pack([3, 'item first'])), rawFrame(Buffer.from([0xc1, 0xc1]))][i % 3]!;
        await tryWrite(stream, frame);
        return answerOf(await reply);
      }),
    );
    const observed: Record<string, unknown> = { refusedBeforeHandler: tally(refusedBeforeHandler) };
    if (target.name === 'ws') Object.assign(observed, await wrongWebSocketRequests(victim.address));
    if (target.name === 'http2') Object.assign(observed, await wrongHttp2Requests(victim.address));
    return { observed, release: () => peer.leave() };
  },
};

async function wrongWebSocketRequests(address: string): Promise<Record<string, unknown>> {
  const url = splitAddress(address).url;
  const statuses = async (path: string, options: { upgrade?: boolean; method?: string }): Promise<number[]> =>
    Promise.all(
      Array.from({ length: 20 }, async () => {
        const ws = await RawWebSocket.connect(url, path, options);
        ws.destroy();
        return ws.status;
      }),
    );
  return {
    wrongPath: tally((await statuses('/nope', {})).map(String)),
    plainGet: tally((await statuses(url.pathname, { upgrade: false })).map(String)),
    post: tally((await statuses(url.pathname, { upgrade: false, method: 'POST' })).map(String)),
  };
}

async function wrongHttp2Requests(address: string): Promise<Record<string, unknown>> {
  const session = await rawHttp2Session(splitAddress(address).url);
  const refused = (o: Http2Outcome): string => (o.rstCode !== 0 || o.status >= 400 ? 'refused' : `served ${o.status}`);
  const ping = rawFrame(pack([7, 1]));
  try {
    const many = (n: number, headers: Record<string, string>, body?: Buffer): Promise<string[]> =>
      Promise.all(Array.from({ length: n }, () => http2Outcome(session, headers, body).then(refused)));
    // The first reverse stream is this session's legitimate one; it stays open (not awaited).
    const reverse = session.request({ ':method': 'POST', ':path': '/agentlink/reverse' });
    reverse.on('error', () => undefined);
    return {
      wrongPath: tally(await many(50, { ':method': 'POST', ':path': '/nope' }, ping)),
      wrongMethod: tally(await many(50, { ':method': 'GET', ':path': '/agentlink' }, ping)),
      putMethod: tally(await many(50, { ':method': 'PUT', ':path': '/agentlink' }, ping)),
      extraReverse: tally(await many(100, { ':method': 'POST', ':path': '/agentlink/reverse' }, ping)),
    };
  } finally {
    session.destroy();
  }
}

/** Every attack, in issue #14's order. */
export const ATTACKS: readonly Attack[] = [
  hugeFrames,
  unreadStreams,
  unfinishedRequests,
  openFlood,
  deepNesting,
  prototypeKeys,
  abandoned,
  slowReaders,
  wrongRequests,
];

export const MEBIBYTE = MiB;
