import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { App } from "./App";
import { liveStore } from "./live/store";
import { getApiKey, onApiKeyChange, ApiError } from "./api/client";
import { applyTheme } from "./lib/theme";
import "./styles.css";

applyTheme();

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      retry: (n, err) => !(err instanceof ApiError && err.status >= 400 && err.status < 500) && n < 2,
      staleTime: 2_000,
      refetchOnWindowFocus: true,
    },
  },
});

// One websocket per tab; lists refetch when live updates resume or the key changes.
// window.__sundialLive lets the end-to-end run read what the page received.
(window as unknown as { __sundialLive: typeof liveStore }).__sundialLive = liveStore;
liveStore.connect({ base: location.href, token: getApiKey });
liveStore.onResume(() => queryClient.invalidateQueries());
onApiKeyChange(() => {
  liveStore.reconnect();
  queryClient.invalidateQueries();
});

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
