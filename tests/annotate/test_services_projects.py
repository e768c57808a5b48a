import pytest

from annotate.errors import ProjectSetupError
from annotate.models import Project, ProjectMode, Subset, Task
from annotate.services.projects import (
    DEFAULT_GUIDELINES,
    InstructionSelection,
    Selection,
    batch_create,
    project_create,
)
from tests.factories import InstructionFactory, benchmark_with_responses

pytestmark = pytest.mark.django_db


def _create(benchmark, systems, selection=None, **kwargs):
    return project_create(
        name=kwargs.pop("name", "study"),
        benchmark=benchmark,
        systems=systems,
        selection=selection or InstructionSelection(),
        **kwargs,
    )


def test_project_gets_a_first_batch_with_one_task_per_instruction_and_default_guidelines():
    benchmark, systems = benchmark_with_responses(instructions=4, systems=2)
    project = _create(benchmark, systems, mode=ProjectMode.BOTH, assignments_per_task=2)
    batch = project.batches.get()
    assert batch.tasks.count() == 4
    assert project.guidelines == DEFAULT_GUIDELINES
    assert "YES" in project.guidelines and "UNKNOWN" in project.guidelines
    assert set(project.systems.all()) == set(systems)
    assert project.mode == ProjectMode.BOTH and project.assignments_per_task == 2


def test_subset_of_instruction_ids_keeps_the_given_order():
    benchmark, systems = benchmark_with_responses(instructions=4)
    ids = list(benchmark.instructions.values_list("external_id", flat=True))
    project = _create(benchmark, systems, InstructionSelection(Selection.IDS, [ids[3], ids[1]]))
    tasks = Task.objects.filter(batch__project=project).order_by("position")
    assert [task.instruction.external_id for task in tasks] == [ids[3], ids[1]]


def test_unknown_instruction_id_is_refused_and_nothing_is_written():
    benchmark, systems = benchmark_with_responses(instructions=2)
    with pytest.raises(ProjectSetupError, match="nope"):
        _create(benchmark, systems, InstructionSelection(Selection.IDS, ["nope"]))
    assert not Project.objects.exists()


def test_random_sample_takes_n_per_subset_reproducibly():
    benchmark, systems = benchmark_with_responses(instructions=10)
    selection = InstructionSelection(Selection.RANDOM, per_subset=2, seed=7)
    first = _create(benchmark, systems, selection, name="a")
    second = _create(benchmark, systems, selection, name="b")

    def picked(project):
        return sorted(
            Task.objects.filter(batch__project=project).values_list(
                "instruction__external_id", "instruction__subset"
            )
        )

    assert picked(first) == picked(second)
    subsets = [subset for _, subset in picked(first)]
    assert subsets.count(Subset.EASY) == 2 and subsets.count(Subset.HARD) == 2


def test_instruction_without_a_response_of_a_chosen_system_is_refused():
    benchmark, systems = benchmark_with_responses(instructions=1)
    lonely = InstructionFactory(benchmark=benchmark)
    with pytest.raises(ProjectSetupError, match=lonely.external_id):
        _create(benchmark, systems)
    assert not Project.objects.exists()


def test_the_refusal_names_the_system_that_lacks_a_response_and_to_what():
    benchmark, systems = benchmark_with_responses(instructions=2, systems=2)
    complete, partial = systems
    instruction = benchmark.instructions.order_by("position").last()
    partial.responses.filter(instruction=instruction).delete()

    with pytest.raises(ProjectSetupError) as refused:
        _create(benchmark, systems)

    message = str(refused.value)
    assert f"{partial.name} has no response to {instruction.external_id}" in message
    assert complete.name not in message
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": " "}, "name"),
        ({"mode": "vibes"}, "Mode"),
        ({"assignments_per_task": 0}, "Assignments per task"),
        ({"allotted_minutes": 0}, "Allotted minutes"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    benchmark, systems = benchmark_with_responses(instructions=1)
    with pytest.raises(ProjectSetupError, match=message):
        _create(benchmark, systems, **kwargs)


def test_second_batch_takes_only_instructions_not_yet_in_the_project():
    benchmark, systems = benchmark_with_responses(instructions=3)
    ids = list(benchmark.instructions.values_list("external_id", flat=True))
    project = _create(benchmark, systems, InstructionSelection(Selection.IDS, ids[:1]))
    batch = batch_create(project=project, name="Batch 2", selection=InstructionSelection())
    assert sorted(batch.tasks.values_list("instruction__external_id", flat=True)) == sorted(ids[1:])
    with pytest.raises(ProjectSetupError, match="No instruction selected"):
        batch_create(project=project, name="Batch 3", selection=InstructionSelection())
    with pytest.raises(ProjectSetupError, match="already has a batch"):
        batch_create(project=project, name="Batch 2", selection=InstructionSelection())
