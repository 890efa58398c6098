"""Jobs: the list with filters and live refresh, the detail with attempts, events and live logs, the form."""

from django.contrib import messages
from django.db.models import Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console import sources
from console.forms import serializer_errors
from console.jobform import payload_from_form
from console.views.common import error_message, project_page
from euler.errors import EulerError, NotFound

PAGE = 100


OUTPUTS_SHOWN = 500  # files listed on a job's page; the archive link and the API give all


def _jobs_app():
    if sources.model("jobs", "Job") is None:
        raise Http404
    from jobs import selectors, services

    return selectors, services


@project_page
def job_list(request):
    if sources.model("jobs", "Job") is None:
        return render(request, "console/jobs.html", {"jobs": None})
    selectors, _services = _jobs_app()
    from jobs.states import JobState

    state = request.GET.get("state", "")
    query = request.GET.get("q", "").strip()[:100]
    error = None
    try:
        jobs = selectors.job_list(project=request.project, state=state or None)
    except EulerError as exc:
        error, jobs = error_message(exc), selectors.job_list(project=request.project)
    if query:
        jobs = jobs.filter(Q(name__icontains=query) | Q(image__icontains=query))
    from console.arrays import rows
    from quotas import scoped

    arrays = scoped.arrays(project=request.project)
    if query:
        arrays = arrays.filter(name__icontains=query)
    array_rows = [] if state else rows(list(arrays.order_by("-created_at", "-id")[:20]))
    return render(
        request,
        "console/jobs.html",
        {
            "array_rows": array_rows,
            "jobs": list(jobs[:PAGE]),
            "total": jobs.count(),
            "page_size": PAGE,
            "states": JobState.choices,
            "state": state,
            "q": query,
            "filter_error": error,
        },
    )


@project_page
def job_detail(request, job_id: int):
    selectors, _services = _jobs_app()
    try:
        job = selectors.job_get(project=request.project, job_id=job_id)
    except NotFound:
        raise Http404 from None
    from jobs.states import TERMINAL

    array_row = None
    if job.array_id:
        from console.arrays import rows

        array_row = rows([job.array])[0]
    from jobs.checkpoints import selectors as checkpoint_selectors

    return render(
        request,
        "console/job_detail.html",
        {
            "job": job,
            "dependencies": list(job.dependencies.all()),
            "array_row": array_row,
            "attempts": list(job.attempts.all()),
            "events": list(job.events.all()),
            "ended": job.state in TERMINAL,
            "ws_path": f"/ws/jobs/{job.pk}/logs/",
            "fair_share": selectors.project_share(project=request.project),
            "outputs": list(job.output_files.filter(complete=True).order_by("path")[:OUTPUTS_SHOWN]),
            "checkpoints": list(checkpoint_selectors.job_checkpoints(job=job)) if job.checkpoint else [],
            "checkpoint_refusal": checkpoint_selectors.last_refusal(job=job) if job.checkpoint else None,
        },
    )


def _perform(request, operation, done: str) -> None:
    """A console form's action on one of the project's objects: another project's is a 404, a refusal a message."""
    try:
        operation()
    except NotFound:
        raise Http404 from None
    except EulerError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, done)


def _act(request, job_id: int, action: str):
    _selectors, services = _jobs_app()
    operation = {"cancel": services.job_cancel, "retry": services.job_retry}[action]
    done = _("Job cancelled.") if action == "cancel" else _("Job queued again.")
    _perform(request, lambda: operation(job_id=job_id, project=request.project, by=request.user), done)
    return redirect("job-detail", job_id=job_id)


@project_page
@require_POST
def job_cancel(request, job_id: int):
    return _act(request, job_id, "cancel")


@project_page
@require_POST
def job_retry(request, job_id: int):
    return _act(request, job_id, "retry")


@project_page
def job_new(request):
    _selectors, services = _jobs_app()
    if request.method != "POST":
        return render(
            request,
            "console/job_new.html",
            {"values": {"cpu_cores": "1", "memory_mib": "256", "timeout_seconds": "3600"}, "errors": {}},
        )
    from jobs.api.serializers import JobCreateSerializer

    payload, errors = payload_from_form(request.POST)
    body = JobCreateSerializer(data=payload)
    if not body.is_valid():
        errors = {**serializer_errors(body.errors), **errors}
    if not errors:
        try:
            job = services.job_submit(project=request.project, spec=dict(body.validated_data), by=request.user)
        except EulerError as exc:
            errors = {"form": error_message(exc)}
        else:
            return redirect("job-detail", job_id=job.pk)
    context = {"values": request.POST, "errors": errors, "retry_on": request.POST.getlist("retry_on")}
    return render(request, "console/job_new.html", context, status=400)


@project_page
def array_detail(request, array_id: int):
    from console.arrays import rows
    from jobs import arrays, deps, selectors
    from quotas import scoped

    try:
        arr = arrays.array_get(project=request.project, array_id=array_id)
    except NotFound:
        raise Http404 from None
    arr = scoped.arrays(project=request.project).prefetch_related("dependencies").get(pk=arr.pk)
    tasks = selectors.job_list(project=request.project, array=arr).order_by("array_index")
    return render(
        request,
        "console/array_detail.html",
        {
            "row": rows([arr])[0],
            "array": arr,
            "dependencies": list(arr.dependencies.all()),
            "pending_reason": deps.reason_for(("array", arr.pk)) if arr.held else "",
            "tasks": list(tasks[:PAGE]),
            "total": arr.count,
            "page_size": PAGE,
        },
    )


def _act_array(request, array_id: int, action: str):
    from jobs import arrays

    operation = {"cancel": arrays.array_cancel, "retry": arrays.array_retry}[action]
    done = _("Array cancelled.") if action == "cancel" else _("Array queued again.")
    _perform(request, lambda: operation(project=request.project, array_id=array_id, by=request.user), done)
    return redirect("array-detail", array_id=array_id)


@project_page
@require_POST
def array_cancel(request, array_id: int):
    return _act_array(request, array_id, "cancel")


@project_page
@require_POST
def array_retry(request, array_id: int):
    return _act_array(request, array_id, "retry")
