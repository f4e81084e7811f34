/** Pieces from this size on are kept as views of the caller's chunk (when that retains little else). */
const VIEW_MIN_BYTES = 4 * 1024;
/** The first staging buffer's size: small pieces are copied into staging buffers that grow by doubling. */
const STAGING_MIN_BYTES = 256;
/** A staging buffer stops growing here and is sealed; the next one starts at this size. */
const STAGING_MAX_BYTES = 64 * 1024;

/**
 * The bytes received so far of one frame whose declared length has not all arrived. Nothing of the declared length
 * is allocated up front; the memory held stays within about twice the bytes received (plus 256 bytes), however
 * the peer cuts them:
 * - a large piece is kept as a view of the chunk it came in, unless that view would pin a much larger buffer,
 * - small pieces (a peer may send one byte per packet) are copied into staging buffers that grow by doubling up to
 *   64 KiB, so a million one-byte chunks cost a few buffers, not a million objects,
 * - once half the frame has arrived, or when its last byte does, everything is moved into one buffer of the
 *   frame's length and later pieces are copied straight into it (most bytes are copied once).
 */
export class PartialFrame {
  private readonly pieces: Uint8Array[] = [];
  private staging: Buffer | undefined;
  private staged = 0;
  /** The frame's own buffer, once half of it has arrived; then pieces are copied straight in. */
  private whole: Buffer | undefined;
  private held = 0;

  constructor(private readonly length: number) {}

  /** Payload bytes held so far. */
  get received(): number {
    return this.held;
  }

  /**
   * Bytes of memory this frame holds now: its whole buffer once promoted (the declared length), else the pieces
   * and the staging buffer's capacity. This, not `received`, is what a budget of memory must be charged.
   */
  get footprint(): number {
    if (this.whole !== undefined) return this.length;
    return this.held - this.staged + (this.staging?.length ?? 0);
  }

  /** Payload bytes still to come. */
  get missing(): number {
    return this.length - this.received;
  }

  /** Holds a piece that does not complete the frame (`piece.length < missing`). */
  add(piece: Uint8Array): void {
    if (this.whole === undefined && (this.held + piece.length) * 2 >= this.length) this.promote();
    const whole = this.whole;
    if (whole !== undefined) {
      whole.set(piece, this.held);
      this.held += piece.length;
    } else if (piece.length >= VIEW_MIN_BYTES) {
      this.seal();
      // A view of a bigger buffer would keep all of it alive: copy unless the piece is most of it.
      this.pieces.push(piece.byteLength * 2 >= piece.buffer.byteLength ? piece : Buffer.from(piece));
      this.held += piece.length;
    } else {
      this.stage(piece);
    }
  }

  /** Joins the held bytes with the last piece (`piece.length === missing`) into the frame's payload. */
  complete(last: Uint8Array): Uint8Array {
    if (this.whole === undefined) this.promote();
    const whole = this.whole!;
    whole.set(last, this.held);
    return whole;
  }

  /**
   * Moves what is held into one buffer of the frame's full length. Done once half the frame has arrived (the
   * memory bound still holds: the buffer is at most twice the bytes received) or when it completes, so most
   * bytes are copied once.
   */
  private promote(): void {
    const staging = this.staging;
    if (this.pieces.length === 0 && staging !== undefined && staging.length === this.length) {
      this.whole = staging; // the staging buffer grew to the frame's size: nothing to move
    } else {
      const whole = Buffer.allocUnsafe(this.length);
      let offset = 0;
      for (const piece of this.pieces) {
        whole.set(piece, offset);
        offset += piece.length;
      }
      if (staging !== undefined) whole.set(staging.subarray(0, this.staged), offset);
      this.whole = whole;
    }
    this.pieces.length = 0;
    this.staging = undefined;
    this.staged = 0;
  }

  private stage(piece: Uint8Array): void {
    let offset = 0;
    while (offset < piece.length) {
      if (this.staging === undefined || this.staged === this.staging.length) this.growStaging(piece.length - offset);
      const staging = this.staging!;
      const take = Math.min(staging.length - this.staged, piece.length - offset);
      staging.set(take === piece.length ? piece : piece.subarray(offset, offset + take), this.staged);
      this.staged += take;
      this.held += take;
      offset += take;
    }
  }

  /** Makes room for `incoming` more bytes: doubles the staging buffer, or seals a full one and starts the next. */
  private growStaging(incoming: number): void {
    // Never more than the frame still needs: the bytes not yet held plus those already staged.
    const room = this.length - this.received + this.staged;
    const current = this.staging;
    if (current !== undefined && current.length < STAGING_MAX_BYTES) {
      const size = Math.min(STAGING_MAX_BYTES, Math.max(2 * current.length, this.staged + incoming), room);
      const grown = Buffer.allocUnsafe(size);
      grown.set(current.subarray(0, this.staged), 0);
      this.staging = grown;
      return;
    }
    this.seal();
    const size = Math.min(STAGING_MAX_BYTES, Math.max(STAGING_MIN_BYTES, incoming, this.received), room);
    this.staging = Buffer.allocUnsafe(size);
  }

  private seal(): void {
    if (this.staging === undefined || this.staged === 0) return;
    this.pieces.push(this.staging.subarray(0, this.staged));
    this.staging = undefined;
    this.staged = 0;
  }
}
