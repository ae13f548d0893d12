import { createParser, type EventSourceMessage } from 'eventsource-parser'

/** Turns a streamed response body into server-sent events as they arrive. */
export async function* readSse(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<EventSourceMessage> {
  const pending: EventSourceMessage[] = []
  const parser = createParser({ onEvent: (e) => pending.push(e) })
  const decoder = new TextDecoder()
  for await (const chunk of body) {
    parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }))
    while (pending.length > 0) yield pending.shift()!
  }
  parser.feed(decoder.decode())
  parser.feed('\n\n') // a last event without its blank line still counts
  while (pending.length > 0) yield pending.shift()!
}
