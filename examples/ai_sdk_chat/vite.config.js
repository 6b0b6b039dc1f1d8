// The page's dev server passes /ai-sdk to `cleveractors serve` (127.0.0.1:8000), so the page
// and the actor share an origin and no CORS is needed.
import { defineConfig } from "vite";

export default defineConfig({
  server: {
    proxy: { "/ai-sdk": { target: "http://127.0.0.1:8000", changeOrigin: true } },
  },
});
