// A bulk insert's JSON array of records as rows to bind, without parsing the JSON columns' values
// only to serialize them again: the rows' JSON columns are bound as TEXT on SQLite, and the text of
// such a value is already in the record. The records are the audit writer's lines
// (src/audit/encode.ts), JSON.stringify's output, whose text of a value is what JSON.stringify
// gives for it again, so a value's slice is the text the parse-then-serialize path stored. A value
// holding an escape goes through that path (an escape's own spelling may differ from
// JSON.stringify's, e.g. the writer's `\ufffd` for a lone surrogate), and anything the scan does
// not expect returns undefined: the caller then parses the whole array (`rowsOfRecordsParsed`).
//
// The SQLite bulk worker runs these functions from their source text (sqlite-bulk-worker.ts), so
// each is self-contained: no imports, no closures over this module, no named inner functions.

/**
 * Rows in `names` order (absent or null: null; JSON columns, flagged in `jsonColumns`, as their
 * JSON text), or undefined when `json` is not an array of flat records the scan reads.
 */
// long-function: one scanner over the text, kept in one function because the bulk worker runs it from its source text.
export function rowsOfJsonRecords(json: string, names: readonly string[], jsonColumns: readonly boolean[]): unknown[][] | undefined {
  const index = new Map<string, number>()
  for (let k = 0; k < names.length; k++) index.set(names[k], k)
  const rows: unknown[][] = []
  /** `"key":` at each place of the last record that named one there, and its column. */
  const seenKeys: string[] = []
  const seenCols: Array<number | undefined> = []
  const n = json.length
  let i = 0
  let slash = 0
  if (json.charCodeAt(i++) !== 91) return undefined // [
  if (json.charCodeAt(i) === 93) return i + 1 === n ? rows : undefined // ]
  for (;;) {
    if (json.charCodeAt(i++) !== 123) return undefined // {
    const row: unknown[] = new Array(names.length).fill(null)
    if (json.charCodeAt(i) === 125) i++ // }
    else {
      for (let p = 0; ; p++) {
        // The key: a column name, no escape in it. Records of one batch mostly name their keys in
        // the same order, so the previous record's key at this place is tried first.
        let col: number | undefined
        const known = seenKeys[p]
        if (known !== undefined && json.startsWith(known, i)) {
          col = seenCols[p]
          i += known.length
        } else {
          if (json.charCodeAt(i) !== 34) return undefined
          const keyEnd = json.indexOf('"', i + 1)
          if (keyEnd < 0) return undefined
          const key = json.slice(i + 1, keyEnd)
          if (key.includes('\\') || json.charCodeAt(keyEnd + 1) !== 58) return undefined // :
          col = index.get(key)
          seenKeys[p] = json.slice(i, keyEnd + 2)
          seenCols[p] = col
          i = keyEnd + 2
        }
        const c = json.charCodeAt(i)
        let value: unknown
        // value is already a JSON column's text (an object's or an array's).
        let isText = false
        if (c === 34) {
          // A string: its text between the quotes, unless it holds an escape.
          const end = json.indexOf('"', i + 1)
          if (end < 0) return undefined
          // The next backslash at or after this string (one forward search per backslash in the whole text).
          if (slash >= 0 && slash <= i) slash = json.indexOf('\\', i + 1)
          if (slash < 0 || slash > end) {
            value = json.slice(i + 1, end)
            i = end + 1
          } else {
            let j = slash
            while (j < n) {
              const d = json.charCodeAt(j)
              if (d === 92) j += 2
              else if (d === 34) break
              else j++
            }
            if (j >= n) return undefined
            value = JSON.parse(json.slice(i, j + 1)) as unknown
            i = j + 1
          }
        } else if (c === 123 || c === 91) {
          // An object or array: its text up to the matching bracket, strings skipped.
          const start = i
          let depth = 0
          let escaped = false
          for (; i < n; i++) {
            const d = json.charCodeAt(i)
            if (d === 34) {
              i++
              while (i < n) {
                const e = json.charCodeAt(i)
                if (e === 92) {
                  escaped = true
                  i += 2
                } else if (e === 34) break
                else i++
              }
            } else if (d === 123 || d === 91) depth++
            else if (d === 125 || d === 93) {
              if (--depth === 0) break
            }
          }
          if (i >= n) return undefined
          i++
          const text = json.slice(start, i)
          isText = col !== undefined && jsonColumns[col]
          value = isText ? (escaped ? JSON.stringify(JSON.parse(text)) : text) : JSON.parse(text)
        } else if (json.startsWith('null', i)) {
          value = null
          i += 4
        } else if (json.startsWith('true', i)) {
          value = true
          i += 4
        } else if (json.startsWith('false', i)) {
          value = false
          i += 5
        } else {
          // A number, up to the next delimiter (JSON's grammar of a number is a subset of Number's).
          const start = i
          while (i < n) {
            const d = json.charCodeAt(i)
            if (d === 44 || d === 125) break
            i++
          }
          if (!((c >= 48 && c <= 57) || c === 45)) return undefined
          value = Number(json.slice(start, i))
          if (!Number.isFinite(value)) return undefined
        }
        if (col !== undefined) row[col] = value === null ? null : jsonColumns[col] && !isText ? JSON.stringify(value) : value
        const sep = json.charCodeAt(i++)
        if (sep === 125) break // }
        if (sep !== 44) return undefined // ,
      }
    }
    rows.push(row)
    const sep = json.charCodeAt(i++)
    if (sep === 93) return i === n ? rows : undefined // ]
    if (sep !== 44) return undefined
  }
}

/** The same rows by parsing the whole array (any JSON the scan does not read). */
export function rowsOfRecordsParsed(json: string, names: readonly string[], jsonColumns: readonly boolean[]): unknown[][] {
  const records = JSON.parse(json) as Array<Record<string, unknown>>
  return records.map((r) => names.map((n, i) => {
    const v = r[n]
    return v === undefined || v === null ? null : jsonColumns[i] ? JSON.stringify(v) : v
  }))
}

/** The rows of a JSON array of records: scanned, or parsed whole when the scan does not read it. */
export function rowsOfRecords(json: string, names: readonly string[], jsonColumns: readonly boolean[]): unknown[][] {
  let rows: unknown[][] | undefined
  try {
    rows = rowsOfJsonRecords(json, names, jsonColumns)
  } catch {
    rows = undefined
  }
  return rows ?? rowsOfRecordsParsed(json, names, jsonColumns)
}
