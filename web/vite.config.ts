import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// The console is served by corral at /console; its built files are shipped inside the
// Python package (src/corral/web/static), so `pip install` needs no Node.js.
const server = process.env.CORRAL_URL ?? "http://127.0.0.1:8765";

export default defineConfig({
  base: "/console/",
  plugins: [react()],
  build: {
    outDir: "../src/corral/web/static",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1600,
  },
  // `npm run dev` serves the console with hot reload, the API from a running server
  server: { proxy: { "/v1": server, "/v2": server, "/corral": server } },
  test: { environment: "jsdom", include: ["src/**/*.test.{ts,tsx}"], setupFiles: ["src/test-setup.ts"] },
});
