// The console's build (`npm run build` runs it after tsc): src/console/ → dist/console/, which
// src/server/console.ts serves at `/`. No inline script or style anywhere in the output (the
// Content-Security-Policy forbids both), no data: assets, no source maps shipped.
import { resolve } from 'node:path'
import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  plugins: [react()],
  logLevel: 'warn',
  build: {
    outDir: resolve(import.meta.dirname, '../../dist/console'),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    sourcemap: false,
    chunkSizeWarningLimit: 2048,
  },
})
