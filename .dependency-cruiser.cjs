// The layering of lib/ that docs/ARCHITECTURE.md describes, checked by `npm run lint:deps` in CI.
// A rule here is a promise about the shape of the code: change one only together with that page.

// lib/core's layer folders, top first. A folder imports only the folders after it in this list;
// files inside one folder import each other freely. 'facade' is the files directly in lib/core.
const CORE_LAYERS = ['facade', 'election', 'inspection', 'acquire', 'kinds', 'waiting', 'rounds', 'voters', 'scripts', 'lock', 'base'];

const layerPath = (layer) => (layer === 'facade' ? '^lib/core/[^/]+$' : `^lib/core/${layer}/`);

// One rule per layer: naming the layer in the rule makes a violation say which step it skips back.
const layerRules = CORE_LAYERS.slice(1).map((layer, index) => ({
  name: `core-layer-${layer}`,
  comment:
    `lib/core/${layer}/ imports only the layers below it (${CORE_LAYERS.slice(index + 2).join(', ')}): ` +
    'dependencies point one way, so a lower layer can be read, tested and changed without the ones above it.',
  severity: 'error',
  from: { path: layerPath(layer) },
  to: { path: CORE_LAYERS.slice(0, index + 1).map(layerPath) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'No import circle anywhere in lib/, type-only imports included: a circle means neither file can be ' +
        'understood or moved alone, and type-only circles become value circles at the next refactor.',
      severity: 'error',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    {
      name: 'core-imports-no-nest',
      comment:
        'lib/core is the engine usable without Nest (the `nestjs-redlock/core` entry): importing @nestjs/* ' +
        'would make Nest a dependency of every plain-Node user.',
      severity: 'error',
      from: { path: '^lib/core/' },
      to: { path: ['^@nestjs/', '(^|/)node_modules/@nestjs/'] },
    },
    {
      name: 'core-imports-only-core',
      comment:
        'lib/core imports nothing else of lib/ (the Nest layer lib/*.ts and the subpath folders ' +
        'lib/testing, lib/terminus, ...): they are built on the engine, never the other way round.',
      severity: 'error',
      from: { path: '^lib/core/' },
      to: { path: '^lib/', pathNot: '^lib/core/' },
    },
    ...layerRules,
    {
      name: 'kinds-do-not-import-kinds',
      comment:
        'A lock kind is one folder under lib/core/kinds/ that no other kind imports: adding or changing a kind ' +
        'then touches its folder and one registration line. What kinds share lives in kinds/shared/ or in ' +
        'the kind interface/registry files directly in lib/core/kinds/.',
      severity: 'error',
      from: { path: '^lib/core/kinds/([^/]+)/', pathNot: '^lib/core/kinds/shared/' },
      to: { path: '^lib/core/kinds/[^/]+/', pathNot: ['^lib/core/kinds/$1/', '^lib/core/kinds/shared/'] },
    },
    {
      name: 'kinds-shared-imports-no-kind',
      comment:
        'kinds/shared/ is what several kinds build on; importing one of them would make every kind that ' +
        'uses shared/ depend on that kind.',
      severity: 'error',
      from: { path: '^lib/core/kinds/shared/' },
      to: { path: '^lib/core/kinds/[^/]+/', pathNot: '^lib/core/kinds/shared/' },
    },
    {
      name: 'voters-know-no-kind',
      comment:
        'The voters (and the scripts, lock and base layers below them) run scripts and identify masters; ' +
        'they do not know which lock kinds or waiting protocols exist, so a new kind needs no transport change.',
      severity: 'error',
      from: { path: '^lib/core/(voters|scripts|lock|base)/' },
      to: { path: '^lib/core/(kinds|waiting)/' },
    },
    {
      name: 'node-redlock-uses-the-public-engine',
      comment:
        "lib/node-redlock is node-redlock's API over the engine as any user has it (nestjs-redlock/core): " +
        'it imports lib/core/index.ts and nothing else of lib/, so it can never rely on what the engine keeps to itself.',
      severity: 'error',
      from: { path: '^lib/node-redlock/' },
      to: { path: '^lib/', pathNot: ['^lib/node-redlock/', '^lib/core/index\\.ts$'] },
    },
    {
      name: 'no-unresolvable',
      comment:
        'Every import in lib/ resolves to a file or an installed package: a subpath folder such as ' +
        'lib/testing may import any lib/core file, but only one that exists.',
      severity: 'error',
      from: { path: '^lib/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // swc parses the TypeScript sources as written, so type-only imports count as edges (the TypeScript
    // compiler API that tsPreCompilationDeps would use is not in TypeScript 7).
    parser: 'swc',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
