/**
 * node:http2 hands a session's frames to the socket from an immediate (the check phase after the turn that
 * wrote them), never during a write. A producer that writes a burst without yielding the turn therefore holds
 * even its first frame until it stops (node's 16 KiB high-water mark, or the end of the burst). A stream's write
 * made in the same turn as its first therefore waits one immediate before it resolves: node's send, scheduled
 * by the first write, runs first, and the first token leaves at once. One shared immediate per turn numbers the
 * turns, so this costs nothing per call (a unary reply writes once).
 */
let turn = 0;
let counting = false;

function nextTurn(): void {
  counting = false;
  turn++;
}

/** The current turn's number (turns end at the check phase). */
export function currentTurn(): number {
  if (!counting) {
    counting = true;
    setImmediate(nextTurn);
  }
  return turn;
}

/** Resolves after the immediates scheduled so far (node's pending send among them). */
export function afterScheduledSends(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
