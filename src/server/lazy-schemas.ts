// Route schemas compiled at a route's first use, not at start-up. Fastify compiles every route's
// validators (ajv) and response serializers (fast-json-stringify) when the app becomes ready; an
// idle server would hold all of that generated code, and ajv's compile-time structures, for routes
// it may never serve (docs/reliability.md "Memory footprint"). These factories hand fastify a
// stand-in per schema that builds the real function with fastify's own default compilers, with
// the same options, the first time it runs: the same inputs are refused with the same issues.
import { createRequire } from 'node:module'
import type { FastifyInstance, FastifyServerOptions, FastifySchemaCompiler, FastifySerializerCompiler } from 'fastify'

type Validate = ((data: unknown, ctx?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown }
type Serialize = (data: unknown) => string
type ValidatorFactory = (externalSchemas: unknown, ajvOptions: unknown) => FastifySchemaCompiler<unknown>
type SerializerFactory = (externalSchemas: unknown, serializerOptions: unknown) => FastifySerializerCompiler<unknown>

// fastify's default compilers, resolved from fastify's own dependencies: the very ones it would use.
const fromFastify = createRequire(import.meta.resolve('fastify'))

/** Schemas handed to fastify and not yet compiled, per app: compileAll() builds them (tests prove every route's schema compiles). */
export interface SchemaCompilation {
  readonly compiled: number
  readonly pending: number
  compileAll(): void
}

const once = <T>(build: () => T): (() => T) => {
  let done: T | undefined
  return () => (done ??= build())
}

const compilations = new WeakMap<FastifyInstance, SchemaCompilation>()

/** The app's lazy schema bookkeeping (undefined for an app built without lazySchemaController). */
export function schemaCompilation(app: FastifyInstance): SchemaCompilation | undefined {
  return compilations.get(app)
}

/** fastify's `schemaController` option, and the bookkeeping to attach to the app once built. */
export function lazySchemaController(): { option: NonNullable<FastifyServerOptions['schemaController']>; attach(app: FastifyInstance): void } {
  const waiting = new Set<() => unknown>()
  let compiled = 0
  // once(), counted and dropped from the waiting set when it first builds.
  const later = <T>(build: () => T): (() => T) => {
    const get = once(() => {
      const built = build()
      waiting.delete(get)
      compiled++
      return built
    })
    waiting.add(get)
    return get
  }
  const book: SchemaCompilation = {
    get compiled() { return compiled },
    get pending() { return waiting.size },
    compileAll() { for (const get of [...waiting]) get() },
  }

  const buildValidator = (externalSchemas: unknown, ajvOptions: unknown): FastifySchemaCompiler<unknown> => {
    const compiler = once(() => (fromFastify('@fastify/ajv-compiler') as () => ValidatorFactory)()(externalSchemas, ajvOptions))
    return (route) => {
      // fastify lowercases a headers schema's names only for its own compiler; no route has one.
      if (route.httpPart === 'headers') throw new Error(`${route.method} ${route.url}: headers schemas are not supported`)
      const real = later(() => compiler()(route) as Validate)
      const validate: Validate = (data, ctx) => real()(data, ctx)
      // fastify reads `schemaEnv` before the call (ajv's functions take the parent then) and `errors` after.
      Object.defineProperties(validate, { errors: { get: () => real().errors }, schemaEnv: { get: () => real().schemaEnv } })
      return validate as ReturnType<FastifySchemaCompiler<unknown>>
    }
  }
  const buildSerializer = (externalSchemas: unknown, serializerOptions: unknown): FastifySerializerCompiler<unknown> => {
    const compiler = once(() => (fromFastify('@fastify/fast-json-stringify-compiler') as () => SerializerFactory)()(externalSchemas, serializerOptions))
    return (route) => {
      const real = later(() => compiler()(route) as Serialize)
      return (data: unknown) => real()(data)
    }
  }
  return {
    option: { compilersFactory: { buildValidator, buildSerializer } } as NonNullable<FastifyServerOptions['schemaController']>,
    attach: (app) => void compilations.set(app, book),
  }
}
