from annotate.management.commands._base import ImportCommand
from annotate.verbalizer.services.sets import evaluation_set_create


class Command(ImportCommand):
    help = "Build an evaluation set: the same seeded items of each dataset under every mapping."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--dataset", action="append", required=True, dest="datasets")
        parser.add_argument("--items", type=int, default=100)
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument(
            "--mappings", default="all", help="all|natural|neutral|unnatural|NAME,NAME,..."
        )
        parser.add_argument("--modes", default="direct", help="direct,cot")

    def handle(self, *args, **options):
        self.run_import(
            evaluation_set_create,
            name=options["name"],
            datasets=options["datasets"],
            items=options["items"],
            seed=options["seed"],
            mappings=options["mappings"],
            modes=[mode.strip() for mode in options["modes"].split(",") if mode.strip()],
        )
