// The console's entry (index.html loads it): restore this tab's sign-in, then render the app.
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { App } from './app.js'
import { restore, SessionGate } from './session.js'

const root = createRoot(document.getElementById('root')!)
void restore().then((restored) =>
  root.render(
    <StrictMode>
      <SessionGate restored={restored}>
        <App />
      </SessionGate>
    </StrictMode>,
  ),
)
