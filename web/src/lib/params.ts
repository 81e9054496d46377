// URL search parameters as page state, so every page and filter has a link.

import { useCallback, useMemo } from "react";
import { useLocation, useSearch } from "wouter";

export function useParams(): [URLSearchParams, (patch: Record<string, string | undefined>, replace?: boolean) => void] {
  const search = useSearch();
  const [path, navigate] = useLocation();
  const params = useMemo(() => new URLSearchParams(search), [search]);
  const set = useCallback(
    (patch: Record<string, string | undefined>, replace = true) => {
      const next = new URLSearchParams(search);
      for (const [k, v] of Object.entries(patch)) {
        if (v) next.set(k, v);
        else next.delete(k);
      }
      const s = next.toString();
      navigate(path + (s ? "?" + s : ""), { replace });
    },
    [search, path, navigate],
  );
  return [params, set];
}
