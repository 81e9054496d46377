// The frame of every page: navigation (a sidebar on a laptop, a menu on a
// phone), the connection indicator, the pause switch, theme and API key.

import { useEffect, useState, type ReactNode } from "react";
import { Link, useLocation } from "wouter";
import { ConnectionIndicator, PauseButton } from "./ConnectionIndicator";
import { csrfToken, getApiKey, setApiKey, signInPath, signOut, unauthorizedListeners } from "../api/client";
import { setTheme, useTheme } from "../lib/theme";

const nav = [
  { href: "/", label: "Overview" },
  { href: "/jobs", label: "Jobs" },
  { href: "/dead", label: "Dead letters" },
  { href: "/schedules", label: "Schedules" },
  { href: "/queues", label: "Queues" },
  { href: "/workers", label: "Workers" },
  { href: "/submit", label: "Submit a job" },
  { href: "/audit", label: "Audit log" },
];

function active(path: string, href: string) {
  return href === "/" ? path === "/" : path === href || path.startsWith(href + "/");
}

export function Layout({ children }: { children: ReactNode }) {
  const [path] = useLocation();
  // The menu (phones) is open for the page it was opened on.
  const [menuAt, setMenuAt] = useState<string | null>(null);
  const menu = menuAt === path;
  const setMenu = (open: boolean) => setMenuAt(open ? path : null);
  const theme = useTheme();
  const [keyOpen, setKeyOpen] = useState(false);

  useEffect(() => {
    const l = () => setKeyOpen(true);
    unauthorizedListeners.add(l);
    return () => {
      unauthorizedListeners.delete(l);
    };
  }, []);

  return (
    <div className="app">
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <button type="button" className="menu-button" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>
          <span aria-hidden="true">☰</span>
          <span className="sr-only">Menu</span>
        </button>
        <Link href="/" className="brand">
          <span className="logo" aria-hidden="true">◐</span> Sundial
        </Link>
        <div className="top-right">
          <ConnectionIndicator />
          <PauseButton />
          {csrfToken() ? (
            <button type="button" className="icon" onClick={() => void signOut()} title="Sign out">
              Sign out
            </button>
          ) : (
            <button type="button" className="icon" onClick={() => setKeyOpen(true)} title="API key">
              Key
            </button>
          )}
          <button
            type="button"
            className="icon"
            onClick={() => setTheme(theme === "dark" ? "light" : "dark")}
            aria-label={theme === "dark" ? "Switch to the light theme" : "Switch to the dark theme"}
            title="Theme"
          >
            <span aria-hidden="true">{theme === "dark" ? "☀" : "☾"}</span>
          </button>
        </div>
      </header>
      <nav id="nav" className={menu ? "side open" : "side"} aria-label="Pages">
        <ul>
          {nav.map((n) => (
            <li key={n.href}>
              <Link href={n.href} className={active(path, n.href) ? "current" : ""} aria-current={active(path, n.href) ? "page" : undefined}>
                {n.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
      {keyOpen ? <ApiKeyDialog onClose={() => setKeyOpen(false)} /> : null}
    </div>
  );
}

function ApiKeyDialog({ onClose }: { onClose: () => void }) {
  const [key, setKey] = useState(getApiKey());
  return (
    <div className="overlay" role="dialog" aria-modal="true" aria-labelledby="key-title">
      <form
        className="dialog open"
        onSubmit={(e) => {
          e.preventDefault();
          setApiKey(key.trim());
          onClose();
        }}
      >
        <h2 id="key-title">API key</h2>
        {signInPath() ? (
          <p>
            <a className="button primary" href={`${signInPath()}?next=${encodeURIComponent(window.location.pathname + window.location.search)}`}>
              Sign in with your identity provider
            </a>
          </p>
        ) : null}
        <p className="muted">
          When the API runs with <code>SUNDIAL_API_KEYS</code>, every call needs a key. It is kept in this tab's session
          storage only and forgotten when the tab closes.
        </p>
        <label>
          Key
          <input type="password" value={key} onChange={(e) => setKey(e.target.value)} autoFocus autoComplete="off" />
        </label>
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>Cancel</button>
          {getApiKey() ? <button type="button" onClick={() => { setApiKey(""); onClose(); }}>Forget key</button> : null}
          <button type="submit" className="primary">Save</button>
        </div>
      </form>
    </div>
  );
}
