// A YAML editor (CodeMirror 6) with lint-as-you-type: `lint(text)` answers diagnostics at 1-based
// line:column (POST /v1/caps/lint), which show as underlines and gutter marks; CodeMirror's linter
// waits for a pause in typing before asking. The editor lives in a shadow root (see below).
import { basicSetup } from 'codemirror'
import { yaml } from '@codemirror/lang-yaml'
import { linter, lintGutter, type Diagnostic as CmDiagnostic } from '@codemirror/lint'
import { EditorState, type Text } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { useEffect, useRef, type ReactNode } from 'react'

export interface LineDiagnostic {
  severity: string
  code: string
  message: string
  line: number
  column: number
}

/** A 1-based line:column as a document offset, clamped into the document. */
function offsetOf(doc: Text, line: number, column: number): number {
  const l = doc.line(Math.min(Math.max(1, line), doc.lines))
  return Math.min(l.from + Math.max(0, column - 1), l.to)
}

export function YamlEditor(props: {
  label: string
  value: string
  onChange: (text: string) => void
  lint?: (text: string) => Promise<readonly LineDiagnostic[]>
  readOnly?: boolean
}): ReactNode {
  const host = useRef<HTMLDivElement>(null)
  const view = useRef<EditorView>(undefined)
  const callbacks = useRef(props)
  callbacks.current = props
  useEffect(() => {
    const extensions = [
      basicSetup,
      yaml(),
      EditorView.updateListener.of((u) => u.docChanged && callbacks.current.onChange(u.state.doc.toString())),
      EditorView.contentAttributes.of({ 'aria-label': props.label }),
      EditorState.readOnly.of(Boolean(props.readOnly)),
      EditorView.editable.of(!props.readOnly),
    ]
    if (props.lint) {
      extensions.push(
        lintGutter(),
        linter(
          async (v): Promise<CmDiagnostic[]> => {
            const found = await callbacks.current.lint!(v.state.doc.toString()).catch(() => [])
            return found.map((d) => {
              const from = offsetOf(v.state.doc, d.line, d.column)
              const to = Math.max(from + 1, v.state.doc.lineAt(from).to)
              return { from, to: Math.min(to, v.state.doc.length), severity: d.severity === 'error' ? 'error' : d.severity === 'warning' ? 'warning' : 'info', message: `${d.code}: ${d.message}` }
            })
          },
          { delay: 400 },
        ),
      )
    }
    // In a shadow root, CodeMirror's styles go into adopted (constructed) style sheets; in the
    // document it would add <style> elements, which the console's CSP (no inline style) refuses.
    const root = host.current!.shadowRoot ?? host.current!.attachShadow({ mode: 'open' })
    view.current = new EditorView({ parent: root, root, state: EditorState.create({ doc: props.value, extensions }) })
    return () => view.current?.destroy()
  }, [props.readOnly])
  // A new document from outside (another role picked) replaces the editor's text.
  useEffect(() => {
    const v = view.current
    if (v && v.state.doc.toString() !== props.value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: props.value } })
  }, [props.value])
  return <div className="editor" ref={host} />
}
