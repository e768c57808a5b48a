"""One small site with an object behind every URL parameter, shared by the security tests.

Everything the pages can show is built here: a benchmark, a project with a researcher attached,
an annotator's claimed assignment, an import job, a crowd publication (MTurk-like and self-hosted)
with a worker's token, and a judge run. `text` seeds every free-text field, so the XSS test can
fill them with markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Hit, Publication
from annotate.crowd.services import publishing, workers
from annotate.crowd.services.publishing import PublishSettings
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    ImportJob,
    ImportKind,
    ImportStatus,
    Label,
    LabelValue,
    Project,
    ProjectMode,
    Response,
)
from annotate.revision.models import (
    Document,
    Passage,
    Rerating,
    RevisionSession,
    Study,
    StudyQuestion,
    StudySystem,
    Turn,
)
from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from annotate.services import assignments as assignment_services
from annotate.services.projects import InstructionSelection, project_create
from evaluation.models import JudgeRun, ReportExport
from evaluation.services.judge_runs import judge_run_create
from tests.evaluation.judge_helpers import make_judge
from tests.factories import (
    BenchmarkFactory,
    InstructionFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    UserFactory,
)

ROLES = ("anonymous", "owner", "other", "researcher", "attached", "admin")


@dataclass
class World:
    users: dict[str, User | None]
    project: Project
    assignment: Assignment
    crowd_assignment: Assignment
    worker_token: str
    hit: Hit
    study: Publication
    publication: Publication
    import_job: ImportJob
    judge_run: JudgeRun
    ids: dict[str, int | str] = field(default_factory=dict)


def _revision(users: dict) -> dict[str, int]:
    """A revision study: the owner's session (one rated turn), a finished imported session
    with a turn sent to the other annotator for re-rating."""
    now = timezone.now()
    study = Study.objects.create(name="revision world", created_at=now)
    systems = [
        StudySystem.objects.create(study=study, name=n, position=i)
        for i, n in enumerate(("rev-a", "rev-b"))
    ]
    question = StudyQuestion.objects.create(study=study, text="Why?", position=1)
    document = Document.objects.create(question=question, position=0, title="Paper", text="Text.")
    Passage.objects.create(document=document, question=question, position=0, text="Text.")
    session = RevisionSession.objects.create(
        study=study,
        question=question,
        system=systems[0],
        annotator=users["owner"],
        initial_answer="a0",
        created_at=now,
    )
    Turn.objects.create(
        session=session,
        position=1,
        instruction="Shorter.",
        instruction_type="stylistic",
        previous_answer="a0",
        answer="a1",
        rating="good",
        comment="ok",
    )
    imported = RevisionSession.objects.create(
        study=study,
        question=question,
        system=systems[1],
        status="finished",
        initial_answer="b0",
        created_at=now,
        source_key="world",
    )
    turn = Turn.objects.create(
        session=imported,
        position=1,
        instruction="More.",
        previous_answer="b0",
        answer="b1",
        rating="bad",
        comment="no",
    )
    rerating = Rerating.objects.create(turn=turn, annotator=users["other"], created_at=now)
    return {
        "study_id": study.pk,
        "session_id": session.pk,
        "rerating_id": rerating.pk,
        "user_id": users["owner"].pk,  # someone who steered a KIWI session: a kind to decide
    }


def _users() -> dict[str, User | None]:
    return {
        "anonymous": None,
        "owner": UserFactory(username="annotator-one", roles=[ANNOTATOR]),
        "other": UserFactory(username="annotator-two", roles=[ANNOTATOR]),
        "researcher": UserFactory(username="researcher-stranger", roles=[RESEARCHER]),
        "attached": UserFactory(username="researcher-attached", roles=[RESEARCHER]),
        "admin": UserFactory(username="site-admin", roles=[ADMIN], is_staff=True),
    }


def _benchmark(text: str):
    benchmark = BenchmarkFactory(name=f"bench {text}")
    systems = [SystemFactory(name="sys-a"), SystemFactory(name="sys-b")]
    for index in range(2):
        instruction = InstructionFactory(
            benchmark=benchmark,
            external_id=f"task_{index + 1}",
            position=index,
            text=f"Instruction {text}",
            input_text=f"Input {text}",
        )
        QuestionFactory(instruction=instruction, position=1, text=f"Question {text}")
        for system in systems:
            ResponseFactory(instruction=instruction, system=system, text=f"Response {text}")
    return benchmark, systems


def _crowd(project: Project, text: str) -> tuple[Publication, Hit, Publication, Assignment, str]:
    batch = project.batches.get()
    chosen = PublishSettings(title="t", description="d")
    base_url = "https://annotate.example.org"
    publication = publishing.publication_create(
        batch=batch, platform_name="fake", chosen=chosen, base_url=base_url
    )
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    study = publishing.publication_create(
        batch=batch, platform_name="selfhosted", chosen=chosen, base_url=base_url
    )
    hit = publication.hits.order_by("id").first()
    worker = workers.crowd_worker_get_or_create(platform="fake", worker_id="AWORKER1")
    assignment = assignment_services.assignment_claim_next(
        annotator=worker, project=project, now=timezone.now()
    )
    token = workers.assignment_token(assignment=assignment)
    return publication, hit, study, assignment, token


def _expert_labels(benchmark, text: str) -> None:
    """Label every response of the benchmark as one imported expert, so reports have figures."""
    expert = Annotator.objects.create(name=f"expert {text}", kind=AnnotatorKind.EXPERT)
    for response in Response.objects.filter(instruction__benchmark=benchmark):
        for question in response.instruction.questions.all():
            Label.objects.create(
                question=question, response=response, annotator=expert, value=LabelValue.YES
            )


def _verbalizer(text: str) -> tuple[int, int, int]:
    """A one-item evaluation set with a model's answer and a study for annotators, offered on a
    self-hosted link too; their ids."""
    from annotate.crowd.services.publishing import PublishSettings
    from annotate.models import System
    from annotate.verbalizer.models import (
        ClassificationDataset,
        ClassificationItem,
        ModelAnswer,
        SystemRun,
    )
    from annotate.verbalizer.services.crowd import study_publication_create
    from annotate.verbalizer.services.humans import human_study_create
    from annotate.verbalizer.services.sets import evaluation_set_create

    dataset = ClassificationDataset.objects.create(
        name=f"world {text}", family="sentiment", positive_name="positive", negative_name="negative"
    )
    ClassificationItem.objects.create(dataset=dataset, position=1, text=text, is_positive=True)
    evaluation_set = evaluation_set_create(
        name=f"world set {text}", datasets=[dataset.name], items=1, seed=1, mappings="golden"
    ).evaluation_set
    run = SystemRun.objects.create(
        evaluation_set=evaluation_set,
        system=System.objects.create(name=f"verbalizer model {text}"),
        endpoint_name="fake",
    )
    ModelAnswer.objects.create(
        prompt=evaluation_set.prompts.get(), system=run.system, run=run, reply=f"positive {text}"
    )
    study = human_study_create(evaluation_set=evaluation_set, name=f"world study {text}")
    link = study_publication_create(
        study=study,
        platform_name="selfhosted",
        chosen=PublishSettings(title=f"Words {text}", description=text),
        base_url="https://annotate.example.org",
    )
    return evaluation_set.pk, study.pk, link.pk


def build_world(*, text: str = "plain") -> World:
    """Create the site; annotator one ("owner") holds a claimed assignment of the project."""
    FakePlatform.reset()
    users = _users()
    benchmark, systems = _benchmark(text)
    project = project_create(
        name=f"project {text}",
        benchmark=benchmark,
        systems=systems,
        selection=InstructionSelection(),
        mode=ProjectMode.DRFR,
        assignments_per_task=10,
        allotted_minutes=60,
        guidelines=f"Guidelines {text}",
        researchers=[users["attached"]],
        created_by=users["admin"],
    )
    owner = assignment_services.annotator_for_user(user=users["owner"])
    assignment = assignment_services.assignment_claim_next(
        annotator=owner, project=project, now=timezone.now()
    )
    publication, hit, study, crowd_assignment, token = _crowd(project, text)
    job = ImportJob(
        kind=ImportKind.INSTRUCTIONS,
        benchmark_name=benchmark.name,
        original_name=f"file {text}.jsonl",
        status=ImportStatus.FAILED,
        message=f"Line 1: {text}",
        created_by=users["attached"],
    )
    job.upload.save("world.jsonl", ContentFile(b"{}\n"), save=True)
    _expert_labels(benchmark, text)
    judge = make_judge(name="world-judge", backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    world = World(
        users=users,
        project=project,
        assignment=assignment,
        crowd_assignment=crowd_assignment,
        worker_token=token,
        hit=hit,
        study=study,
        publication=publication,
        import_job=job,
        judge_run=run,
    )
    set_id, study_id, study_publication_id = _verbalizer(text)
    world.ids = {
        "set_id": set_id,
        "human_study_id": study_id,
        "study_publication_id": study_publication_id,
        # Any id: the rules only send an answer's action a GET (405) or an empty POST (refused).
        "answer_id": study_id,
        "figure_name": "groups",
        "slug": "reports",  # a help page
        "benchmark_id": benchmark.pk,
        "instruction_id": assignment.task.instruction_id,
        "project_id": project.pk,
        "assignment_id": assignment.pk,
        "batch_id": project.batches.get().pk,
        "job_id": job.pk,
        "publication_id": publication.pk,
        "annotator_id": Annotator.objects.get(kind=AnnotatorKind.CROWD).pk,
        "run_id": run.pk,
        "engine_run_id": run.engine_run_id,
        "endpoint_id": judge.endpoint_id,
        "hit_token": hit.unique_request_token,
        "hit_pk": hit.pk,
        "link_token": study.link_token,
        "token": token,
        "fmt": "csv",
        "table": "leaderboard",
        "name": "leaderboard",
        "image_format": "svg",
        # A queued export: its status answers, its download is not there yet (404).
        "export_id": ReportExport.objects.create(benchmark=benchmark).pk,
        "figure": "ratings",
        "task": "rating-judge",
        **_revision(users),
    }
    return world
