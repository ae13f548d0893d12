#!/usr/bin/env node
// Production entry: runs the compiled commands from dist/ with the shipped oclif manifest.
import { execute } from '@oclif/core'

await execute({ dir: import.meta.url })
