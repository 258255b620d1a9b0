// Writes the licence of every package esbuild put into the bundle (from its metafile).
import { readFileSync, existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

const meta = JSON.parse(readFileSync(process.argv[2], "utf8"));
const packages = new Set();
for (const output of Object.values(meta.outputs)) {
  for (const input of Object.keys(output.inputs)) {
    const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (m) packages.add(m[1]);
  }
}
let text = "";
for (const name of [...packages].sort()) {
  const dir = join("node_modules", name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  text += `==== ${name}@${pkg.version} (${pkg.license ?? "see below"})\n\n`;
  text += file && existsSync(join(dir, file)) ? readFileSync(join(dir, file), "utf8").trim() : `licence: ${pkg.license}`;
  text += "\n\n";
}
process.stdout.write(text);
