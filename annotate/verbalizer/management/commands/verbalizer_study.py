from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import pluralize

from annotate.errors import AnnotateError
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.runs import evaluation_set_get


def _names(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


class Command(BaseCommand):
    help = "Offer a slice of an evaluation set to annotators (they answer with keys 1/2)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--set", required=True, dest="set_name")
        parser.add_argument("--datasets", help="NAME,NAME (default: all of the set's)")
        parser.add_argument("--mappings", help="NAME,NAME (default: all of the set's)")
        parser.add_argument("--modes", default="direct", help="direct,cot")
        parser.add_argument("--items", type=int, help="the first N sampled items per dataset")
        parser.add_argument("--answers", type=int, default=3, help="people per prompt")
        parser.add_argument(
            "--completion-code",
            default="",
            help="self-hosted link: shown when a participant is done",
        )
        parser.add_argument(
            "--completion-url",
            default="",
            help="self-hosted link: where a participant goes when done",
        )

    def handle(self, *args, **options):
        try:
            study = human_study_create(
                evaluation_set=evaluation_set_get(name=options["set_name"]),
                name=options["name"], datasets=_names(options["datasets"]),
                mappings=_names(options["mappings"]), modes=_names(options["modes"]),
                items_per_dataset=options["items"], answers_per_prompt=options["answers"],
                completion_code=options["completion_code"],
                completion_url=options["completion_url"],
            )  # fmt: skip
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        prompts, answers = study.prompts.count(), study.answers_per_prompt
        self.stdout.write(
            f"Study {study.name}: {prompts} prompt{pluralize(prompts)}, {answers} "
            f"answer{pluralize(answers)} each; annotators find it at /verbalizer/work/."
        )
