/*
 * hd_servo.c -- the OpenHaptics backend's servo callback, in C, with its force watchdog.
 *
 * Registered with hdScheduleAsynchronous as the device's only scheduler callback, it runs
 * in libHD's servo thread every tick (1 kHz) and never takes Python's GIL:
 *
 *   hdBeginFrame -> read HD_CURRENT_TRANSFORM / _POSITION / _VELOCITY / _BUTTONS
 *   -> publish the sample (wakes the Python servo loop waiting in hds_wait_sample)
 *   -> armed: wait up to answer_wait_s for the Python tick's force for this sample
 *   -> the force watchdog picks what to send -> hdSetDoublev(HD_CURRENT_FORCE)
 *   -> hdEndFrame -> hdGetError (every pending error kept; any error latches hd_fault)
 *
 * The force watchdog: while armed, the force the Python tick posted (hds_post_force) is
 * sent only while it is fresh. It watches from the run's first posted force on (until
 * then zero is sent: the first tick may take long to warm up, and no force is held).
 * When no force has been posted for stale_s, and the loop has had a sample to answer for
 * pending_s (a sample is unanswered until the loop posts a force for it or a later one),
 * the watchdog trips (latched until the next hds_arm) and the force ramps linearly from
 * what the motors had to zero over ramp_s; from the first callback cut_s after the last
 * fresh force it is zero whatever the ramp says. The second condition spares the loop
 * when the servo thread itself was held up (the OS, a hypervisor): with no new sample
 * the loop had nothing to answer. A sleeping or stuck Python tick, or another thread
 * holding the GIL, cannot delay any of this: nothing here waits for Python longer than
 * answer_wait_s.
 * Disarmed, after a libHD error, or closed, the callback sends zero force.
 *
 * libHD's entry points are not linked: hds_create takes their addresses from the library
 * the process already loaded (pyOpenHaptics' handle), so one build serves the real libHD
 * and the project's test double alike. Enum values are those of the real hdDefines.h.
 * Units: libHD's millimetres at this edge; seconds of CLOCK_MONOTONIC (Python's
 * time.perf_counter on Linux); forces in newtons, device frame.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned int HHD;
typedef unsigned int HDenum;
typedef unsigned int HDCallbackCode;

typedef struct {
    unsigned int errorCode;
    int internalErrorCode;
    HHD hHD;
} HDErrorInfo;

#define HD_CURRENT_BUTTONS 0x2000
#define HD_CURRENT_POSITION 0x2050
#define HD_CURRENT_VELOCITY 0x2051
#define HD_CURRENT_TRANSFORM 0x2052
#define HD_CURRENT_FORCE 0x2700
#define HD_CALLBACK_CONTINUE 1

#define HDS_ERRORS 16
#define HDS_PUB_RING 64 /* publication times of the latest samples (a power of 2) */

typedef void (*FrameFn)(HHD);
typedef void (*GetDoublevFn)(HDenum, double *);
typedef void (*GetIntegervFn)(HDenum, int *);
typedef void (*SetDoublevFn)(HDenum, const double *);
typedef HDErrorInfo (*GetErrorFn)(void);

/* One servo tick's reading, handed to Python (mirrored by haptics._hd_servo.Sample). */
typedef struct {
    int64_t seq;        /* 1, 2, ... per callback; 0: none yet */
    double t_s;         /* CLOCK_MONOTONIC when the callback began [s] */
    double pos_mm[3];
    double vel_mm_s[3];
    double xform[16];   /* column-major 4x4, mm */
    int32_t buttons;
    int32_t tripped;    /* the force watchdog has tripped (latched while armed) */
    int32_t hd_fault;   /* libHD reported an error (latched until hds_clear_fault) */
    int32_t closed;     /* hds_close was called */
    int64_t n_errors;   /* errors read from libHD so far */
} HdsSample;

/* What happened so far (mirrored by haptics._hd_servo.Status). */
typedef struct {
    int32_t armed, posted, tripped, hd_fault, probed;
    int32_t has_pos, has_vel, has_xf, has_btn;
    double trip_t_s;        /* when the watchdog tripped [s] (NaN: not tripped) */
    double trip_age_s;      /* age of the last fresh force when it tripped [s] */
    double zero_t_s;        /* first callback after the trip that sent zero force [s] */
    double last_fresh_t_s;  /* when the last fresh force was posted [s] */
    int64_t callbacks;      /* callbacks begun since hds_create */
    int64_t completed;      /* callbacks that have sent their force */
    int64_t answered;       /* armed callbacks that sent the force answering their sample */
    int64_t unanswered;     /* armed callbacks whose wait for the answer ran out */
    int64_t trips;          /* watchdog trips since hds_create */
    double busy_sum_s, busy_max_s; /* time spent in armed callbacks [s] */
    int64_t n_errors;
    uint32_t err_code[HDS_ERRORS]; /* the last HDS_ERRORS errors: error n at [n % HDS_ERRORS] */
    int32_t err_internal[HDS_ERRORS];
    double err_t_s[HDS_ERRORS];
    double sent_force_n[3]; /* what the last callback sent */
} HdsStatus;

typedef struct {
    FrameFn begin_frame, end_frame;
    GetDoublevFn get_doublev;
    GetIntegervFn get_integerv;
    SetDoublevFn set_doublev;
    GetErrorFn get_error;
    HHD handle;
    double stale_s, pending_s, ramp_s, cut_s, answer_wait_s;

    pthread_mutex_t lock;
    pthread_cond_t sample_cv; /* a new sample (Python waits) */
    pthread_cond_t force_cv;  /* a new force (the callback waits) */

    HdsSample sample;
    HdsStatus st;
    double prev_pos_mm[3], prev_t_s;
    int have_prev;

    double force_n[3];        /* the latest posted force */
    int64_t force_seq;        /* the sample it answers */
    double pub_t_s[HDS_PUB_RING]; /* pub_t_s[seq % HDS_PUB_RING]: when sample seq was published */
    double trip_force_n[3];   /* on the motors when the watchdog tripped */
} HdsServo;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct timespec abs_time(double t_s) {
    struct timespec ts;
    double whole = floor(t_s);
    ts.tv_sec = (time_t)whole;
    ts.tv_nsec = (long)((t_s - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    return ts;
}

double hds_now(void) { return now_s(); }

/* Pop every pending libHD error into the ring; returns how many. */
static int drain_errors(HdsServo *s, double t) {
    int n = 0;
    for (; n < HDS_ERRORS; n++) {
        HDErrorInfo e = s->get_error();
        if (e.errorCode == 0) break;
        int64_t k = s->st.n_errors++ % HDS_ERRORS;
        s->st.err_code[k] = e.errorCode;
        s->st.err_internal[k] = e.internalErrorCode;
        s->st.err_t_s[k] = t;
    }
    return n;
}

/* Does a query raise an error? (first frame: which state this libHD answers) */
static int answers(HdsServo *s) {
    HDErrorInfo e = s->get_error();
    int ok = e.errorCode == 0;
    while (e.errorCode != 0) e = s->get_error();
    return ok;
}

static void probe(HdsServo *s, double *xf, double *pos, double *vel, int *btn) {
    s->get_doublev(HD_CURRENT_TRANSFORM, xf);
    s->st.has_xf = answers(s);
    s->get_doublev(HD_CURRENT_POSITION, pos);
    s->st.has_pos = answers(s);
    s->get_doublev(HD_CURRENT_VELOCITY, vel);
    s->st.has_vel = answers(s);
    s->get_integerv(HD_CURRENT_BUTTONS, btn);
    s->st.has_btn = answers(s);
    s->st.probed = 1;
}

static void read_state(HdsServo *s, double t, HdsSample *out) {
    double xf[16], pos[3] = {0, 0, 0}, vel[3] = {0, 0, 0};
    int btn = 0;
    static const double identity[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    memcpy(xf, identity, sizeof xf);
    if (!s->st.probed) probe(s, xf, pos, vel, &btn);
    if (s->st.has_xf) s->get_doublev(HD_CURRENT_TRANSFORM, xf);
    if (s->st.has_pos) s->get_doublev(HD_CURRENT_POSITION, pos);
    else memcpy(pos, &xf[12], sizeof pos);
    if (s->st.has_btn) s->get_integerv(HD_CURRENT_BUTTONS, &btn);
    if (s->st.has_vel) {
        s->get_doublev(HD_CURRENT_VELOCITY, vel);
    } else {
        /* Differenced over the callbacks' own start times (no GIL in between). */
        double dt = t - s->prev_t_s;
        for (int i = 0; i < 3; i++)
            vel[i] = (s->have_prev && dt > 0.0 && dt < 0.05) ? (pos[i] - s->prev_pos_mm[i]) / dt : 0.0;
        memcpy(s->prev_pos_mm, pos, sizeof pos);
        s->prev_t_s = t;
        s->have_prev = 1;
    }
    if (!s->st.has_xf) memcpy(&xf[12], pos, sizeof pos);
    memcpy(out->pos_mm, pos, sizeof pos);
    memcpy(out->vel_mm_s, vel, sizeof vel);
    memcpy(out->xform, xf, sizeof xf);
    out->buttons = btn;
}

/* How long the oldest unanswered sample has waited at t (0: all answered). */
static double unanswered_age(const HdsServo *s, double t) {
    int64_t latest = s->sample.seq, first = s->force_seq + 1;
    if (first > latest) return 0.0;
    if (latest - first >= HDS_PUB_RING) first = latest - HDS_PUB_RING + 1; /* older: long stale */
    return t - s->pub_t_s[first % HDS_PUB_RING];
}

/* The force to send now (lock held, armed). */
static void watchdog_force(HdsServo *s, double t, double *f) {
    if (!s->st.posted) return; /* zero until the run's first force */
    double age = t - s->st.last_fresh_t_s;
    if (!s->st.tripped && age > s->stale_s && unanswered_age(s, t) > s->pending_s) {
        s->st.tripped = 1;
        s->st.trips++;
        s->st.trip_t_s = t;
        s->st.trip_age_s = age;
        memcpy(s->trip_force_n, s->st.sent_force_n, sizeof s->trip_force_n);
    }
    if (!s->st.tripped) {
        memcpy(f, s->force_n, 3 * sizeof(double));
        return;
    }
    double k = 1.0 - (t - s->st.trip_t_s) / s->ramp_s;
    if (!(k > 0.0) || age >= s->cut_s) k = 0.0;
    if (k > 1.0) k = 1.0;
    for (int i = 0; i < 3; i++) f[i] = k * s->trip_force_n[i];
}

HDCallbackCode hds_callback(void *user) {
    HdsServo *s = (HdsServo *)user;
    double t = now_s();
    double f[3] = {0.0, 0.0, 0.0};
    HdsSample sample;
    memset(&sample, 0, sizeof sample);
    s->begin_frame(s->handle);
    read_state(s, t, &sample);

    pthread_mutex_lock(&s->lock);
    s->st.callbacks++;
    sample.seq = s->sample.seq + 1;
    sample.t_s = t;
    sample.tripped = s->st.tripped;
    sample.hd_fault = s->st.hd_fault;
    sample.closed = s->sample.closed;
    sample.n_errors = s->st.n_errors;
    s->sample = sample;
    s->pub_t_s[sample.seq % HDS_PUB_RING] = t;
    pthread_cond_broadcast(&s->sample_cv);
    int armed = s->st.armed && !s->st.hd_fault && !s->sample.closed;
    if (armed) {
        if (!s->st.tripped) {
            struct timespec until = abs_time(t + s->answer_wait_s);
            while (s->force_seq < sample.seq && s->st.armed && !s->sample.closed) {
                if (pthread_cond_timedwait(&s->force_cv, &s->lock, &until) != 0) break;
            }
            if (s->force_seq >= sample.seq) s->st.answered++;
            else s->st.unanswered++;
        }
        watchdog_force(s, now_s(), f);
    }
    if (s->st.tripped && isnan(s->st.zero_t_s) && f[0] == 0.0 && f[1] == 0.0 && f[2] == 0.0)
        s->st.zero_t_s = now_s(); /* sent right below */
    memcpy(s->st.sent_force_n, f, sizeof f);
    pthread_mutex_unlock(&s->lock);

    s->set_doublev(HD_CURRENT_FORCE, f);
    s->end_frame(s->handle);

    double t_end = now_s();
    pthread_mutex_lock(&s->lock);
    if (drain_errors(s, t_end) > 0) {
        s->st.hd_fault = 1; /* this frame's force has gone out; the next ones are zero */
        s->sample.hd_fault = 1;
        s->sample.n_errors = s->st.n_errors;
    }
    s->st.completed++;
    pthread_cond_broadcast(&s->sample_cv); /* also wakes hds_wait_zero_sent */
    if (armed) {
        double busy = t_end - t;
        s->st.busy_sum_s += busy;
        if (busy > s->st.busy_max_s) s->st.busy_max_s = busy;
    }
    pthread_mutex_unlock(&s->lock);
    return HD_CALLBACK_CONTINUE;
}

/* ------------------------------------------------------------ Python's side ---- */

void *hds_create(void *begin_frame, void *end_frame, void *get_doublev, void *get_integerv,
                 void *set_doublev, void *get_error, unsigned int handle, double stale_s,
                 double pending_s, double ramp_s, double cut_s, double answer_wait_s) {
    if (!(stale_s > 0.0 && pending_s >= 0.0 && ramp_s > 0.0 && cut_s > 0.0 && answer_wait_s >= 0.0))
        return NULL;
    HdsServo *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->begin_frame = (FrameFn)begin_frame;
    s->end_frame = (FrameFn)end_frame;
    s->get_doublev = (GetDoublevFn)get_doublev;
    s->get_integerv = (GetIntegervFn)get_integerv;
    s->set_doublev = (SetDoublevFn)set_doublev;
    s->get_error = (GetErrorFn)get_error;
    s->handle = handle;
    s->stale_s = stale_s;
    s->pending_s = pending_s;
    s->ramp_s = ramp_s;
    s->cut_s = cut_s;
    s->answer_wait_s = answer_wait_s;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->sample_cv, &attr);
    pthread_cond_init(&s->force_cv, &attr);
    pthread_condattr_destroy(&attr);
    s->st.trip_t_s = s->st.zero_t_s = NAN;
    s->st.last_fresh_t_s = -INFINITY;
    return s;
}

/* Only once libHD no longer calls hds_callback with it (unscheduled, scheduler stopped). */
void hds_destroy(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    if (!s) return;
    pthread_cond_destroy(&s->sample_cv);
    pthread_cond_destroy(&s->force_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Start a run: the force is zero and fresh now; the watchdog is reset. */
void hds_arm(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    memset(s->force_n, 0, sizeof s->force_n);
    s->force_seq = s->sample.seq;
    s->st.last_fresh_t_s = now_s();
    s->st.tripped = 0;
    s->sample.tripped = 0;
    s->st.trip_t_s = s->st.zero_t_s = NAN;
    s->st.trip_age_s = 0.0;
    s->st.posted = 0;
    s->st.armed = 1;
    pthread_mutex_unlock(&s->lock);
}

/* End a run: zero force from the next callback on. */
void hds_disarm(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    s->st.armed = 0;
    memset(s->force_n, 0, sizeof s->force_n);
    pthread_cond_broadcast(&s->force_cv);
    pthread_mutex_unlock(&s->lock);
}

/* After hds_disarm (or a fault): wait up to timeout_s until a callback begun after this
 * call has sent its (zero) force. Returns 1 when one has, 0 on a timeout. */
int hds_wait_zero_sent(void *handle, double timeout_s) {
    HdsServo *s = (HdsServo *)handle;
    struct timespec until = abs_time(now_s() + timeout_s);
    pthread_mutex_lock(&s->lock);
    int64_t target = s->st.callbacks + 1;
    while (s->st.completed < target && !s->sample.closed) {
        if (pthread_cond_timedwait(&s->sample_cv, &s->lock, &until) != 0) break;
    }
    int done = s->st.completed >= target || s->sample.closed;
    pthread_mutex_unlock(&s->lock);
    return done;
}

/* Wake every waiter for good; the callback sends zero from now on. */
void hds_close(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    s->st.armed = 0;
    s->sample.closed = 1;
    pthread_cond_broadcast(&s->sample_cv);
    pthread_cond_broadcast(&s->force_cv);
    pthread_mutex_unlock(&s->lock);
}

void hds_clear_fault(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    s->st.hd_fault = 0;
    s->sample.hd_fault = 0;
    pthread_mutex_unlock(&s->lock);
}

/* The Python tick's force [N] for sample seq; returns 1 when the watchdog has tripped
 * (the force is then ignored: zero stays latched until the next hds_arm). */
int hds_post_force(void *handle, int64_t seq, const double *force_n) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    int tripped = s->st.tripped;
    if (!tripped && s->st.armed) {
        memcpy(s->force_n, force_n, sizeof s->force_n);
        if (seq > s->force_seq) s->force_seq = seq;
        s->st.last_fresh_t_s = now_s();
        s->st.posted = 1;
        pthread_cond_broadcast(&s->force_cv);
    }
    pthread_mutex_unlock(&s->lock);
    return tripped;
}

/* Wait up to timeout_s for a sample newer than after_seq; copy the newest into out.
 * Returns its seq, or 0 on a timeout or once closed. */
int64_t hds_wait_sample(void *handle, int64_t after_seq, double timeout_s, HdsSample *out) {
    HdsServo *s = (HdsServo *)handle;
    struct timespec until = abs_time(now_s() + timeout_s);
    int64_t seq = 0;
    pthread_mutex_lock(&s->lock);
    while (s->sample.seq <= after_seq && !s->sample.closed) {
        if (pthread_cond_timedwait(&s->sample_cv, &s->lock, &until) != 0) break;
    }
    if (s->sample.seq > after_seq && !s->sample.closed) {
        *out = s->sample;
        seq = out->seq;
    }
    pthread_mutex_unlock(&s->lock);
    return seq;
}

/* hds_post_force then hds_wait_sample in one call: the servo loop's one wait per tick
 * (every call out of Python hands the GIL over and must win it back). */
int64_t hds_post_and_wait(void *handle, int64_t seq, const double *force_n, double timeout_s,
                          HdsSample *out) {
    hds_post_force(handle, seq, force_n);
    return hds_wait_sample(handle, seq, timeout_s, out);
}

/* The newest sample (seq 0: none yet). */
void hds_latest(void *handle, HdsSample *out) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    *out = s->sample;
    pthread_mutex_unlock(&s->lock);
}

void hds_status(void *handle, HdsStatus *out) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    *out = s->st;
    pthread_mutex_unlock(&s->lock);
}

void hds_reset_stats(void *handle) {
    HdsServo *s = (HdsServo *)handle;
    pthread_mutex_lock(&s->lock);
    s->st.answered = s->st.unanswered = 0;
    s->st.busy_sum_s = s->st.busy_max_s = 0.0;
    pthread_mutex_unlock(&s->lock);
}
