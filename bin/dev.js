#!/usr/bin/env -S node --import tsx
// Development entry: runs the TypeScript sources directly (no build step).
import { execute } from '@oclif/core'

await execute({ development: true, dir: import.meta.url })
