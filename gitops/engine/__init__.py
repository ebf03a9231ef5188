"""Running the program: under the SDK's mock engine (program.py) or the real Pulumi CLI (pulumi_cli.py), the
stack files it reads (stacks.py), what it takes from the SDK (sdk.py), and the export's speed optimizations."""
