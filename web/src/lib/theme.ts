// Light and dark themes: the system's choice unless the user picked one.

import { useSyncExternalStore } from "react";

export type Theme = "light" | "dark";
const storageKey = "sundial.theme";
const listeners = new Set<() => void>();

function system(): Theme {
  return typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function currentTheme(): Theme {
  const t = typeof localStorage !== "undefined" ? localStorage.getItem(storageKey) : null;
  return t === "dark" || t === "light" ? t : system();
}

export function applyTheme(t: Theme = currentTheme()) {
  document.documentElement.dataset.theme = t;
  document.documentElement.style.colorScheme = t;
}

export function setTheme(t: Theme) {
  localStorage.setItem(storageKey, t);
  applyTheme(t);
  listeners.forEach((l) => l());
}

export function useTheme(): Theme {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    currentTheme,
  );
}
