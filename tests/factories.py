"""factory_boy factories for the data model. Shared by every test module."""

import factory
from django.contrib.auth.models import Group, User
from django.utils import timezone

from annotate import models


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ["username"]
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw")

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        if create and extracted:
            for name in extracted:
                self.groups.add(Group.objects.get(name=name))
        if create:
            self.save()

    @factory.post_generation
    def kind(self, create, extracted, **kwargs):
        """`kind="expert"`: the account's Annotator, of that decided kind, so its KIWI sessions
        and re-ratings count (annotate.revision.counting); none by default, as a new account."""
        if create and extracted:
            models.Annotator.objects.update_or_create(
                user=self, defaults={"name": self.username, "kind": extracted}
            )


class BenchmarkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Benchmark

    name = factory.Sequence(lambda n: f"bench{n}")


class InstructionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Instruction

    benchmark = factory.SubFactory(BenchmarkFactory)
    external_id = factory.Sequence(lambda n: f"task_{n}")
    subset = models.Subset.EASY
    category = "Writing"
    text = factory.Sequence(lambda n: f"Write sentence number {n}.")
    input_text = ""
    position = factory.Sequence(lambda n: n)


class QuestionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Question

    instruction = factory.SubFactory(InstructionFactory)
    position = factory.Sequence(lambda n: n + 1)
    text = factory.Sequence(lambda n: f"Is requirement {n} met?")
    constraint_mask = models.ConstraintType.CONTENT


class SystemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.System
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"system-{n}")


class ResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Response

    instruction = factory.SubFactory(InstructionFactory)
    system = factory.SubFactory(SystemFactory)
    text = "A response."


class AnnotatorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Annotator

    name = factory.Sequence(lambda n: f"annotator-{n}")
    kind = models.AnnotatorKind.EXPERT


class LabelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Label

    question = factory.SubFactory(QuestionFactory)
    response = factory.SubFactory(
        ResponseFactory, instruction=factory.SelfAttribute("..question.instruction")
    )
    annotator = factory.SubFactory(AnnotatorFactory)
    value = models.LabelValue.YES


class DirectScoreFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.DirectScore

    response = factory.SubFactory(ResponseFactory)
    annotator = factory.SubFactory(AnnotatorFactory)
    score = 3


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Project

    name = factory.Sequence(lambda n: f"project-{n}")
    benchmark = factory.SubFactory(BenchmarkFactory)


class BatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Batch

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"batch-{n}")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Task

    batch = factory.SubFactory(BatchFactory)
    instruction = factory.SubFactory(
        InstructionFactory, benchmark=factory.SelfAttribute("..batch.project.benchmark")
    )


class AssignmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Assignment

    task = factory.SubFactory(TaskFactory)
    annotator = factory.SubFactory(AnnotatorFactory)
    claimed_at = factory.LazyFunction(timezone.now)
    expires_at = factory.LazyAttribute(lambda a: a.claimed_at + timezone.timedelta(hours=1))
    order_seed = 1


def benchmark_with_responses(
    *, instructions: int = 3, systems: int = 3, questions: int = 2, subset=None, benchmark=None
):
    """Return (benchmark, systems): every instruction has `questions` questions and a response
    from each system."""
    benchmark = benchmark or BenchmarkFactory()
    system_rows = [SystemFactory() for _ in range(systems)]
    for index in range(instructions):
        instruction = InstructionFactory(
            benchmark=benchmark,
            subset=subset or (models.Subset.EASY if index % 2 == 0 else models.Subset.HARD),
        )
        for position in range(1, questions + 1):
            QuestionFactory(instruction=instruction, position=position)
        for system in system_rows:
            ResponseFactory(
                instruction=instruction, system=system, text=f"{system.name} answers {index}"
            )
    return benchmark, system_rows


def project_with_tasks(
    *,
    instructions: int = 3,
    systems: int = 3,
    questions: int = 2,
    mode: str = models.ProjectMode.DRFR,
    assignments_per_task: int = 3,
    allotted_minutes: int = 60,
):
    """Return a project (through the service) whose first batch has one task per instruction."""
    from annotate.services.projects import InstructionSelection, project_create

    benchmark, system_rows = benchmark_with_responses(
        instructions=instructions, systems=systems, questions=questions
    )
    return project_create(
        name=f"project-{benchmark.name}",
        benchmark=benchmark,
        systems=system_rows,
        selection=InstructionSelection(),
        mode=mode,
        assignments_per_task=assignments_per_task,
        allotted_minutes=allotted_minutes,
    )
