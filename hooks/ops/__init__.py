"""dynafold's op engine: FlashInfer's dormant op declarations made real for Dynamo only.

Served from the library itself (src/python/src/engine_package.rs embeds every file of this
folder at build time and answers imports of `_dynafold_ops.*`), so the package is importable
only in a process dynafold is loaded into, and never from a file on disk.

- `engine`: waking declarations (`wake`), narrowing what a schema cannot say (`narrowing`),
  the fake check at first run (`fake_check`), and the per-op data the engine reads
  (`corrections`, `fakes`).
- `mechanisms`: what a declaration alone cannot give Dynamo: attention plans kept as graph
  data, per-stream scratch, wrapper methods as operators, partial methods.
"""
