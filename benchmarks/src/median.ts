/** The middle value (the upper one of the two middles for an even count); the input is not reordered. */
export function median(values: readonly number[]): number {
  return [...values].sort((a, b) => a - b)[values.length >> 1]!;
}
