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
