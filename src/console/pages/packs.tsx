// Packs (content bundles built into images): every pack the org sees, its own and the community's.
// Writes (caps:write): upload a pack archive (multipart, POST /v1/packs/upload), create one from a
// registry image (POST /v1/packs), edit an owned pack's metadata and visibility (PUT /v1/packs/{id}),
// re-upload an upload-origin pack (PUT /v1/packs/{id}/upload) or re-pull an image-origin one
// (`image_ref`), clone a visible pack into the org (with a name), delete an owned one.
import type { ReactNode } from 'react'
import { PACK_VISIBILITIES } from '../../contract/resources.js'
import { seg } from '../api.js'
import { changedValues, filledValues, type Field } from '../form.js'
import { ResourceList } from '../resource.js'
import { useSession } from '../session.js'

interface Pack {
  id: string
  name: string
  display_name?: string
  description?: string
  category?: string
  suggested_packs?: string
  version: string
  tier: string
  visibility: string
  owned?: boolean
  image_origin?: string
  image_ref?: string
  image_digest?: string
  size_bytes?: number
}

const VISIBILITY: Field = { name: 'visibility', label: 'Visibility', type: 'select', options: [...PACK_VISIBILITIES] }
const UPLOAD_FIELDS: readonly Field[] = [{ name: 'archive', label: 'Pack archive (.tar.gz of the pack directory)', type: 'file', required: true }, VISIBILITY]
const IMAGE_FIELDS: readonly Field[] = [{ name: 'image_ref', label: 'Image reference (host[:port]/repository[:tag|@sha256:…])', required: true }, VISIBILITY]
const META_FIELDS: readonly Field[] = [
  { name: 'display_name', label: 'Display name' },
  { name: 'description', label: 'Description', type: 'textarea' },
  { name: 'category', label: 'Category' },
  { name: 'suggested_packs', label: 'Suggested packs (comma-separated names)' },
  { ...VISIBILITY, required: true },
]

/** The edit fields of one pack: its metadata, and a new archive or image as its origin allows. */
function editFields(p: Pack): readonly Field[] {
  if (p.image_origin === 'upload') return [...META_FIELDS, { name: 'archive', label: 'New archive (re-upload)', type: 'file' }]
  if (p.image_origin === 'image_ref') return [...META_FIELDS, { name: 'image_ref', label: 'Image reference (re-pull)', required: true }]
  return META_FIELDS
}

/** The multipart body of an upload: `visibility` (when chosen), then the `archive` file part. */
function archiveForm(archive: File, visibility?: string): FormData {
  const form = new FormData()
  if (visibility) form.append('visibility', visibility)
  form.append('archive', archive, archive.name)
  return form
}

export function PacksPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('caps:write')
  return (
    <ResourceList<Pack>
      title="Packs"
      note={<p className="hint">Upload a pack archive (or `corral pack upload DIR`), create one from a registry image, clone a visible pack into this org.</p>}
      load={async (signal) => (await api.get<{ packs: Pack[] }>('/packs', {}, signal)).packs}
      rowKey={(p) => p.id}
      columns={[
        { label: 'Name', render: (p) => p.name },
        { label: 'Version', render: (p) => p.version },
        { label: 'Tier', render: (p) => p.tier },
        { label: 'Visibility', render: (p) => p.visibility },
        { label: 'Owned', render: (p) => (p.owned ? 'yes' : 'no') },
        { label: 'Origin', render: (p) => p.image_origin ?? '' },
        { label: 'Digest', render: (p) => <code>{(p.image_digest ?? '').slice(0, 19)}</code> },
      ]}
      actions={
        write
          ? [
              { label: (p) => `Clone ${p.name}`, when: (p) => !p.owned, run: (p) => api.post(`/packs/${seg(p.id)}/clone`, {}) },
              { label: () => 'Delete', danger: true, when: (p) => Boolean(p.owned), run: (p) => api.del(`/packs/${seg(p.id)}`) },
            ]
          : []
      }
      edit={
        write
          ? {
              name: (p) => p.name,
              when: (p) => Boolean(p.owned),
              fields: editFields,
              initial: (p) => Object.fromEntries(editFields(p).filter((f) => f.type !== 'file').map((f) => [f.name, String(p[f.name as keyof Pack] ?? '')])),
              submit: async (p, initial, values) => {
                const fields = editFields(p).filter((f) => f.type !== 'file')
                const body = changedValues(fields, initial, values)
                const archive = values.archive instanceof File ? values.archive : undefined
                if (Object.keys(body).length === 0 && !archive) throw new Error('nothing changed')
                if (Object.keys(body).length > 0) await api.call('PUT', `/packs/${seg(p.id)}`, { body })
                if (archive) await api.upload('PUT', `/packs/${seg(p.id)}/upload`, archiveForm(archive))
              },
            }
          : undefined
      }
      create={
        write
          ? [
              {
                title: 'Upload pack',
                fields: UPLOAD_FIELDS,
                submit: async (v) => {
                  if (!(v.archive instanceof File)) throw new Error('choose a pack archive')
                  const pack = await api.upload<Pack>('POST', '/packs/upload', archiveForm(v.archive, typeof v.visibility === 'string' ? v.visibility : undefined))
                  return `Uploaded ${pack.name} ${pack.version}.`
                },
              },
              {
                title: 'Create pack from image',
                fields: IMAGE_FIELDS,
                submit: async (v) => {
                  const pack = await api.post<Pack>('/packs', filledValues(IMAGE_FIELDS, v))
                  return `Created ${pack.name} ${pack.version} from its image.`
                },
              },
            ]
          : undefined
      }
    />
  )
}
