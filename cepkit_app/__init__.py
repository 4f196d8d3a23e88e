"""The cepkit application: the `cepkit` command line and the pipelines that chain the packages.

The only layer that imports every other package: data flows one way, kit <- datagen, querygen,
validator, translators <- harness <- cepkit_app (tests/test_layering.py keeps it so).
`cli/` holds one module per subcommand; `pipelines/` the end-to-end runs (`cepkit pairs`,
`cepkit micro`, the sustainable-throughput search) as library functions taking typed configs.
"""
