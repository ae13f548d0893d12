// How every PostgreSQL connection of a store reads values: int8 (counts, epoch-ms) and numeric
// (sums) as JS numbers, every value we aggregate being far below 2^53; the rest as pg reads them.
// The store's pool and the audit log's leaf readers share it, so a row reads (and so encodes, as a
// leaf of the provable log) the same through either.
import type pgModule from 'pg'

export function storeTypes(pg: typeof pgModule): pgModule.ClientConfig['types'] {
  return {
    getTypeParser(oid: number, format?: string) {
      if (oid === 20 || oid === 1700) return (v: string) => Number(v)
      return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format)
    },
  } as pgModule.ClientConfig['types']
}
