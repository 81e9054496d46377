/// <reference types="vitest/config" />
import { defineConfig, type Plugin } from "vite";
import react from "@vitejs/plugin-react";
import { brotliCompressSync, gzipSync, constants } from "node:zlib";

// precompress writes a .gz and a .br next to every text asset of the build,
// so that the Go server can send them as they are (no compression per request).
function precompress(): Plugin {
  return {
    name: "sundial-precompress",
    apply: "build",
    generateBundle(_options, bundle) {
      for (const [name, file] of Object.entries(bundle)) {
        if (!/\.(js|css|html|svg|json|txt)$/.test(name)) continue;
        const source = file.type === "chunk" ? file.code : file.source;
        const data = typeof source === "string" ? Buffer.from(source) : Buffer.from(source);
        if (data.length < 1024) continue;
        this.emitFile({ type: "asset", fileName: name + ".gz", source: gzipSync(data, { level: 9 }) });
        this.emitFile({
          type: "asset",
          fileName: name + ".br",
          source: brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
        });
      }
    },
  };
}

// The API serves the build from web/dist/app (embedded by web/embed.go).
// `npm run dev` proxies the API of `make run` (SUNDIAL_DEV_API overrides it).
export default defineConfig({
  plugins: [react(), precompress()],
  build: {
    outDir: "dist/app",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
  server: {
    proxy: {
      "/v1": { target: process.env.SUNDIAL_DEV_API ?? "http://127.0.0.1:8080", ws: true },
    },
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.{ts,tsx}"],
    setupFiles: ["src/test/setup.ts"],
    // contrast.test.ts reads the stylesheet (styles.css?raw).
    css: { include: [/styles\.css/] },
  },
});
