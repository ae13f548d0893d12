// The hook the response phases feed: budget metering watches the upstream response as it is
// relayed (status and headers, each chunk, the end), without holding any byte back.
export interface ResponseObserver {
  onHeaders(status: number, headers: Record<string, string | string[]>): void
  onChunk(chunk: Buffer): void
  /** `complete` is false when the stream was cut (upstream error or client gone). */
  onEnd(complete: boolean): void
}
