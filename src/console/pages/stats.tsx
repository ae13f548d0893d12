// Stats: charts of GET /v1/audit/stats — decisions over time by decision and by deny reason (time
// buckets), the top destinations and capabilities, and one counter's budget usage over time
// (`metric=sum:debits.<counter>`). Recharts draws SVG through React, so no inline style or script.
import { useState, type ReactNode } from 'react'
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts'
import type { Query } from '../api.js'
import { useSession } from '../session.js'
import { Status, useLoad } from '../ui.js'
import type { AuditEvent } from '../wire.js'

interface Bucket {
  group: Record<string, string>
  bucket?: string
  value: number
}

const RANGES: Record<string, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 }
const COLORS = ['#0b5cad', '#a4161a', '#1a7f37', '#8250df', '#bc4c00', '#0a7e8c', '#6e7781', '#cf222e']

/** Buckets of (time, group) as chart rows: one row per time bucket, one key per group value. */
function pivot(buckets: readonly Bucket[], dimension: string): { rows: Record<string, string | number>[]; keys: string[] } {
  const byTime = new Map<string, Record<string, string | number>>()
  const keys = new Set<string>()
  for (const b of buckets) {
    const t = b.bucket ?? ''
    const k = b.group[dimension] || '(none)'
    keys.add(k)
    const row = byTime.get(t) ?? { bucket: t.replace('T', ' ').replace(/:00(\.000)?Z$/, 'Z') }
    row[k] = b.value
    byTime.set(t, row)
  }
  return { rows: [...byTime.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, r]) => r), keys: [...keys] }
}

function useStats(query: Query, deps: readonly unknown[]) {
  const { api } = useSession()
  return useLoad((signal) => api.get<{ buckets: Bucket[] }>('/audit/stats', query, signal).then((r) => r.buckets), deps)
}

function OverTime(props: { title: string; id: string; query: Query; dimension: string; range: string }): ReactNode {
  const stats = useStats(props.query, [props.range, JSON.stringify(props.query)])
  const { rows, keys } = pivot(stats.data ?? [], props.dimension)
  return (
    <figure className="chart" aria-labelledby={props.id} data-chart={props.id}>
      <figcaption id={props.id}>{props.title}</figcaption>
      <Status loaded={stats} />
      {stats.data && rows.length === 0 && <p className="muted">No data in this range.</p>}
      {rows.length > 0 && (
        <ResponsiveContainer width="100%" height={240}>
          <BarChart data={rows}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="bucket" fontSize={11} />
            <YAxis allowDecimals={false} fontSize={11} />
            <Tooltip />
            <Legend />
            {keys.map((k, i) => (
              <Bar key={k} dataKey={k} stackId="a" fill={k === 'deny' ? '#a4161a' : k === 'allow' ? '#1a7f37' : COLORS[i % COLORS.length]} isAnimationActive={false} />
            ))}
          </BarChart>
        </ResponsiveContainer>
      )}
    </figure>
  )
}

function Top(props: { title: string; id: string; dimension: string; from: string; range: string }): ReactNode {
  const stats = useStats({ group_by: props.dimension, top: `10:${props.dimension}`, filter: ['event_type=policy_decision'], from: props.from }, [props.range])
  const rows = (stats.data ?? []).map((b) => ({ name: b.group[props.dimension] || '(none)', value: b.value })).sort((a, b) => b.value - a.value)
  return (
    <figure className="chart" aria-labelledby={props.id} data-chart={props.id}>
      <figcaption id={props.id}>{props.title}</figcaption>
      <Status loaded={stats} />
      {stats.data && rows.length === 0 && <p className="muted">No data in this range.</p>}
      {rows.length > 0 && (
        <ResponsiveContainer width="100%" height={40 + rows.length * 28}>
          <BarChart data={rows} layout="vertical" margin={{ left: 40 }}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis type="number" allowDecimals={false} fontSize={11} />
            <YAxis type="category" dataKey="name" width={180} fontSize={11} />
            <Tooltip />
            <Bar dataKey="value" name="requests" fill="#0b5cad" isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      )}
    </figure>
  )
}

function CounterUsage(props: { from: string; range: string }): ReactNode {
  const { api } = useSession()
  // The counters seen lately: the debits of recent decisions that carry any counter (`counter!=`).
  const seen = useLoad(async (signal) => {
    const page = await api.get<{ events: AuditEvent[] }>('/audit', { filter: ['event_type=policy_decision', 'counter!='], limit: 200, from: props.from }, signal)
    return [...new Set(page.events.flatMap((e) => Object.keys(e.debits ?? {})))].sort()
  }, [props.range])
  const [chosen, setChosen] = useState('')
  const counter = chosen || seen.data?.[0] || ''
  const stats = useLoad(
    (signal) =>
      counter
        ? api.get<{ buckets: Bucket[] }>('/audit/stats', { time_bucket: 'auto', metric: `sum:debits.${counter}`, filter: [`counter=${counter}`], from: props.from }, signal).then((r) => r.buckets)
        : Promise.resolve([]),
    [counter, props.range],
  )
  const rows = (stats.data ?? []).map((b) => ({ bucket: (b.bucket ?? '').replace('T', ' ').replace(/:00(\.000)?Z$/, 'Z'), value: b.value }))
  return (
    <figure className="chart" aria-labelledby="chart-budget" data-chart="chart-budget">
      <figcaption id="chart-budget">Budget usage over time</figcaption>
      <label>
        Counter{' '}
        <select value={counter} onChange={(e) => setChosen(e.target.value)}>
          {(seen.data ?? []).map((c) => (
            <option key={c}>{c}</option>
          ))}
        </select>
      </label>
      <Status loaded={seen} />
      {seen.data?.length === 0 && <p className="muted">No counter debited in this range.</p>}
      {rows.length > 0 && (
        <ResponsiveContainer width="100%" height={240}>
          <BarChart data={rows}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="bucket" fontSize={11} />
            <YAxis fontSize={11} />
            <Tooltip />
            <Legend />
            <Bar dataKey="value" name={`sum of debits.${counter}`} fill="#8250df" isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      )}
    </figure>
  )
}

export function StatsPage(): ReactNode {
  const [range, setRange] = useState('24h')
  // Rounded to the minute so re-renders ask the same query.
  const from = new Date(Math.floor((Date.now() - RANGES[range]!) / 60_000) * 60_000).toISOString()
  const decisions = ['event_type=policy_decision']
  return (
    <section aria-labelledby="stats-title">
      <h1 id="stats-title">Stats</h1>
      <label>
        Range{' '}
        <select value={range} onChange={(e) => setRange(e.target.value)}>
          {Object.keys(RANGES).map((r) => (
            <option key={r} value={r}>
              last {r}
            </option>
          ))}
        </select>
      </label>
      <div className="grid2">
        <OverTime title="Decisions over time" id="chart-decisions" dimension="decision" range={range} query={{ group_by: 'decision', time_bucket: 'auto', filter: decisions, from }} />
        <OverTime title="Denials over time by reason" id="chart-reasons" dimension="reason" range={range} query={{ group_by: 'reason', time_bucket: 'auto', filter: [...decisions, 'decision=deny'], from }} />
        <Top title="Top destinations" id="chart-destinations" dimension="destination" from={from} range={range} />
        <Top title="Top capabilities" id="chart-capabilities" dimension="capability_name" from={from} range={range} />
        <CounterUsage from={from} range={range} />
      </div>
    </section>
  )
}
