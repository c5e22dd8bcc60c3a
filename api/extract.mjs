#!/usr/bin/env node
// The API reports: one per entry point of package.json's "exports", written by API Extractor
// from the built declarations (run `npm run build` first).
//
//   node api/extract.mjs           fails when the public surface differs from api/*.api.md, or
//                                  when API Extractor warns (malformed TSDoc, say), or when an
//                                  exported name has no TSDoc comment
//   node api/extract.mjs --update  rewrites api/*.api.md to the current surface
//
// A change to the public API is therefore a change to a committed file, visible in review.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { Extractor, ExtractorConfig } = require('@microsoft/api-extractor');

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const update = process.argv.includes('--update');
const packageJsonFullPath = join(ROOT, 'package.json');
const pkg = JSON.parse(readFileSync(packageJsonFullPath, 'utf8'));
const configObjectFullPath = join(HERE, 'api-extractor.json');
const base = ExtractorConfig.loadFile(configObjectFullPath);

/** `.` → nestjs-redlock.api.md, `./core` → nestjs-redlock-core.api.md. */
function reportName(subpath) {
  return subpath === '.' ? `${pkg.name}.api.md` : `${pkg.name}-${subpath.slice(2).replaceAll('/', '-')}.api.md`;
}

const entries = Object.entries(pkg.exports).filter(([subpath]) => subpath !== './package.json');
let failed = 0;
for (const [subpath, conditions] of entries) {
  const types = conditions.require?.types;
  if (!types) throw new Error(`package.json exports["${subpath}"] has no require.types`);
  const mainEntryPointFilePath = join(ROOT, types);
  if (!existsSync(mainEntryPointFilePath)) throw new Error(`${types} is missing: run \`npm run build\` first`);
  const configObject = {
    ...base,
    mainEntryPointFilePath,
    apiReport: { ...base.apiReport, reportFileName: reportName(subpath) },
  };
  const config = ExtractorConfig.prepare({ configObject, configObjectFullPath, packageJsonFullPath });
  const result = Extractor.invoke(config, {
    localBuild: update,
    // Said once per entry point and always the same: API Extractor parses the declarations with
    // its own TypeScript (6.x), older than the project's, which is fine for reading .d.ts files.
    messageCallback: (message) => {
      if (message.messageId === 'console-preamble' || message.messageId === 'console-compiler-version-notice') {
        message.handled = true;
      }
    },
  });
  const label = `${pkg.name}${subpath.slice(1)}`;
  // API Extractor marks what has no doc comment in the report; an exported name must have one.
  const report = readFileSync(join(update ? config.reportFolder : config.reportTempFolder, reportName(subpath)), 'utf8');
  const undocumented = [...report.matchAll(/^\/\/ @public \(undocumented\)\n(?:export )?(?:declare )?(?:abstract )?\w+ (\w+)/gm)].map((m) => m[1]);
  if (undocumented.length > 0) console.error(`${label}: exported without a TSDoc comment: ${undocumented.join(', ')}`);
  if (result.succeeded && undocumented.length === 0) {
    console.log(`${label}: ${update && result.apiReportChanged ? 'report updated' : 'matches its report'}`);
  } else if (result.succeeded) {
    failed++;
  } else {
    failed++;
    console.error(`${label}: ${result.errorCount} error(s), ${result.warningCount} warning(s)`);
    // Show what changed, so a CI log says it without a local run.
    if (result.apiReportChanged) {
      const committed = join(config.reportFolder, reportName(subpath));
      const current = join(config.reportTempFolder, reportName(subpath));
      spawnSync('diff', ['-u', committed, current], { stdio: 'inherit' });
    }
  }
}
if (failed > 0) {
  console.error(
    `${failed} of ${entries.length} entry points differ from api/*.api.md, have warnings or undocumented names. ` +
      'If the API change is intended, run `npm run api:update` and commit the reports with it.',
  );
  process.exitCode = 1;
}
