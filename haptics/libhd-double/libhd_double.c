/*
 * libhd_double.c -- a test double of the OpenHaptics HDAPI (libHD.so), Touch-like.
 *
 * It emulates the subset of the HD API that pyOpenHaptics 1.0.1 and the capture-trainer
 * backend call, with the enum values, types and calling conventions of the real
 * hdDefines.h / hd.h (OpenHaptics 3.x):
 *
 *   device:     hdInitDevice, hdDisableDevice, hdGetCurrentDevice, hdMakeCurrentDevice
 *   caps:       hdEnable, hdDisable, hdIsEnabled
 *   scheduler:  hdStartScheduler, hdStopScheduler, hdScheduleAsynchronous,
 *               hdScheduleSynchronous, hdUnschedule, hdWaitForCompletion,
 *               hdGetSchedulerTimeStamp, hdSetSchedulerRate
 *   frames:     hdBeginFrame, hdEndFrame
 *   state:      hdGet{Boolean,Integer,Float,Double,Long}v, hdGetString,
 *               hdSet{Double,Float,Integer}v
 *   errors:     hdGetError (a stack: the newest error first, HD_SUCCESS when empty),
 *               hdGetErrorString
 *
 * Behaviour (documented HD semantics only):
 *   - a scheduler thread ticks at HD_UPDATE_RATE (1 kHz) on absolute deadlines
 *     (clock_nanosleep TIMER_ABSTIME; SCHED_FIFO where allowed, LIBHD_DOUBLE_NO_RT=1 to
 *     opt out; a late tick is caught up, a backlog over 10 ms is dropped); each tick samples the stylus, runs the scheduled
 *     callbacks in order of priority (highest first), removes those that return
 *     HD_CALLBACK_DONE, and sends the force committed by the outermost hdEndFrame;
 *   - a frame starts with a zero force; a tick without a frame sends zero force;
 *   - HD_FORCE_OUTPUT and HD_MAX_FORCE_CLAMPING start disabled; with clamping the force
 *     norm is clamped to HD_NOMINAL_MAX_FORCE, without it an over-limit force is sent
 *     as is and HD_EXCEEDED_MAX_FORCE is raised; a non-finite force is never sent
 *     (zero instead) and raises HD_INVALID_VALUE;
 *   - the stylus is a mass-damper (tip mass, viscous friction) that moves under the
 *     sent force and under a scriptable hand: none, a compliant hold (spring-damper to
 *     an anchor) or a prescribed sinusoidal trajectory; it stops at the workspace box.
 *
 * Extra exported functions (prefix hdd_) script the hand, buttons, orientation and
 * errors, and read what reached the "motors" for tests and benchmarks: force statistics,
 * and a log of every commit with its time on the double's clock (hdd_now_s), from which
 * a test measures when the force at the device became zero.
 * Environment: LIBHD_DOUBLE_NO_DEVICE=1 makes hdInitDevice fail as with no device;
 * LIBHD_DOUBLE_MINIMAL=1 answers only the state queries pyOpenHaptics itself makes.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned int HHD;
typedef unsigned int HDenum;
typedef unsigned int HDerror;
typedef unsigned int HDCallbackCode;
typedef unsigned long HDSchedulerHandle;
typedef unsigned short HDushort;
typedef unsigned char HDboolean;
typedef unsigned int HDWaitCode;
typedef int HDint;
typedef long HDlong;
typedef float HDfloat;
typedef double HDdouble;
typedef unsigned long HDulong;
typedef const char *HDstring;
typedef HDCallbackCode (*HDSchedulerCallback)(void *pUserData);

typedef struct {
    HDerror errorCode;
    int internalErrorCode;
    HHD hHD;
} HDErrorInfo;

#define HD_SUCCESS 0x0000
#define HD_INVALID_ENUM 0x0100
#define HD_INVALID_VALUE 0x0101
#define HD_INVALID_OPERATION 0x0102
#define HD_INVALID_INPUT_TYPE 0x0103
#define HD_BAD_HANDLE 0x0104
#define HD_WARM_MOTORS 0x0200
#define HD_EXCEEDED_MAX_FORCE 0x0201
#define HD_EXCEEDED_MAX_FORCE_IMPULSE 0x0202
#define HD_EXCEEDED_MAX_VELOCITY 0x0203
#define HD_FORCE_ERROR 0x0204
#define HD_DEVICE_FAULT 0x0300
#define HD_DEVICE_ALREADY_INITIATED 0x0301
#define HD_COMM_ERROR 0x0302
#define HD_COMM_CONFIG_ERROR 0x0303
#define HD_TIMER_ERROR 0x0304
#define HD_ILLEGAL_BEGIN 0x0400
#define HD_ILLEGAL_END 0x0401
#define HD_FRAME_ERROR 0x0402
#define HD_INVALID_PRIORITY 0x0500
#define HD_SCHEDULER_FULL 0x0501
#define HD_INVALID_LICENSE 0x0600

#define HD_CURRENT_BUTTONS 0x2000
#define HD_CURRENT_SAFETY_SWITCH 0x2001
#define HD_CURRENT_INKWELL_SWITCH 0x2002
#define HD_CURRENT_POSITION 0x2050
#define HD_CURRENT_VELOCITY 0x2051
#define HD_CURRENT_TRANSFORM 0x2052
#define HD_LAST_BUTTONS 0x2200
#define HD_LAST_POSITION 0x2250
#define HD_LAST_VELOCITY 0x2251
#define HD_LAST_TRANSFORM 0x2252
#define HD_VERSION 0x2500
#define HD_DEVICE_MODEL_TYPE 0x2501
#define HD_DEVICE_DRIVER_VERSION 0x2502
#define HD_DEVICE_VENDOR 0x2503
#define HD_DEVICE_SERIAL_NUMBER 0x2504
#define HD_DEVICE_FIRMWARE_VERSION 0x2505
#define HD_MAX_WORKSPACE_DIMENSIONS 0x2550
#define HD_USABLE_WORKSPACE_DIMENSIONS 0x2551
#define HD_TABLETOP_OFFSET 0x2552
#define HD_INPUT_DOF 0x2553
#define HD_OUTPUT_DOF 0x2554
#define HD_UPDATE_RATE 0x2600
#define HD_INSTANTANEOUS_UPDATE_RATE 0x2601
#define HD_NOMINAL_MAX_STIFFNESS 0x2602
#define HD_NOMINAL_MAX_FORCE 0x2603
#define HD_NOMINAL_MAX_CONTINUOUS_FORCE 0x2604
#define HD_NOMINAL_MAX_DAMPING 0x2609
#define HD_CURRENT_FORCE 0x2700
#define HD_LAST_FORCE 0x2800
#define HD_FORCE_OUTPUT 0x4000
#define HD_MAX_FORCE_CLAMPING 0x4001
#define HD_FORCE_RAMPING 0x4002
#define HD_SOFTWARE_FORCE_LIMIT 0x4003
#define HD_ONE_FRAME_LIMIT 0x4004

#define HD_CALLBACK_DONE 0
#define HD_CALLBACK_CONTINUE 1
#define HD_WAIT_CHECK_STATUS 0
#define HD_WAIT_INFINITE 1
#define HD_INVALID_HANDLE 0xFFFFFFFFu

#define DEVICE_HANDLE 1u
#define MAX_CALLBACKS 32
#define MAX_ERRORS 32
#define MAX_BACKLOG 10

/* Touch-class limits (3D Systems Touch data sheet). */
static const double NOMINAL_MAX_FORCE_N = 3.3;
static const double NOMINAL_CONTINUOUS_FORCE_N = 0.88;
static const double NOMINAL_MAX_STIFFNESS_N_MM = 1.26;
static const double NOMINAL_MAX_DAMPING_NS_MM = 0.005;
static const double USABLE_WORKSPACE_MM[6] = {-80.0, -60.0, -35.0, 80.0, 60.0, 35.0};
static const double MAX_WORKSPACE_MM[6] = {-215.0, -110.0, -85.0, 215.0, 205.0, 130.0};
/* Stylus: apparent tip mass and viscous friction of the linkage. */
static const double TIP_MASS_KG = 0.045;
static const double FRICTION_N_S_M = 0.4;

typedef struct {
    HDSchedulerCallback fn;
    void *user;
    HDushort priority;
    HDSchedulerHandle handle;
    int active;
    int synchronous;
    int done;
} Slot;

typedef struct {
    double pos_mm[3];
    double vel_mm_s[3];
    double xform[16];
    int buttons;
} Sample;

enum { HAND_NONE = 0, HAND_HOLD = 1, HAND_TRAJECTORY = 2 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* device + stats + errors */
/* Callback slots; held by the servo thread while the callbacks run, so that hdUnschedule
 * from another thread returns only once the callback is no longer running. Recursive:
 * a callback may schedule or unschedule. */
static pthread_mutex_t g_sched_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t g_sched_cond = PTHREAD_COND_INITIALIZER;

static int g_initialized = 0;
static HHD g_current = HD_INVALID_HANDLE;
static int g_force_output = 0;
static int g_clamping = 0;
static int g_ramping = 0;
static int g_sw_force_limit = 1;

static HDErrorInfo g_errors[MAX_ERRORS];
static int g_n_errors = 0;

static Slot g_slots[MAX_CALLBACKS];
static HDSchedulerHandle g_next_handle = 1;
static pthread_t g_thread;
static volatile int g_running = 0;
static int g_rate_hz = 1000;
static double g_tick_start_s = 0.0;
static double g_inst_rate_hz = 0.0;

/* Stylus physics (device frame, SI inside, mm at the API). */
static double g_pos_m[3] = {0.0, 0.0, 0.0};
static double g_vel_m_s[3] = {0.0, 0.0, 0.0};
static double g_rot[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}; /* row-major stylus rotation */
static int g_buttons = 0;
static int g_hand_mode = HAND_NONE;
static double g_hand_anchor_m[3] = {0, 0, 0};
static double g_hand_k_n_m = 0.0;
static double g_hand_c_n_s_m = 0.0;
static double g_traj_center_m[3] = {0, 0, 0};
static double g_traj_amp_m[3] = {0, 0, 0};
static double g_traj_freq_hz = 0.0;
static double g_sim_t_s = 0.0;

/* The force being sent to the motors (N) and the frame being built. */
static double g_motor_force_n[3] = {0, 0, 0};
static double g_last_force_n[3] = {0, 0, 0};
static double g_frame_force_n[3] = {0, 0, 0};
static int g_frame_depth = 0;
static int g_frame_this_tick = 0;
static Sample g_sample, g_last_sample;

/* Recording. */
static long g_ticks = 0;
static long g_late_ticks = 0;
static long g_wake_late_ticks = 0;
static int g_realtime = 0;
static double g_max_wake_late_s = 0.0;
static long g_force_commits = 0;
static long g_nonfinite_forces = 0;
static long g_over_limit_sent = 0;
static double g_max_sent_norm = 0.0;
static double g_max_commanded_norm = 0.0;
static long g_callback_calls = 0;

/* What reached the motors, tick by tick: when each force was committed and its value. */
#define MOTOR_LOG 16384
static double g_log_t[MOTOR_LOG];
static double g_log_f[MOTOR_LOG][3];
static long g_log_n = 0;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void push_error(HDerror code, int internal) {
    pthread_mutex_lock(&g_lock);
    if (g_n_errors == MAX_ERRORS) {
        memmove(&g_errors[0], &g_errors[1], sizeof(HDErrorInfo) * (MAX_ERRORS - 1));
        g_n_errors--;
    }
    g_errors[g_n_errors].errorCode = code;
    g_errors[g_n_errors].internalErrorCode = internal;
    g_errors[g_n_errors].hHD = g_current;
    g_n_errors++;
    pthread_mutex_unlock(&g_lock);
}

static int in_servo_thread(void) { return g_running && pthread_equal(pthread_self(), g_thread); }

static void make_sample(Sample *s) {
    for (int i = 0; i < 3; i++) {
        s->pos_mm[i] = g_pos_m[i] * 1e3;
        s->vel_mm_s[i] = g_vel_m_s[i] * 1e3;
    }
    /* Column-major 4x4 (OpenGL convention): element [col*4 + row]. */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) s->xform[c * 4 + r] = g_rot[r * 3 + c];
    s->xform[3] = s->xform[7] = s->xform[11] = 0.0;
    s->xform[12] = s->pos_mm[0];
    s->xform[13] = s->pos_mm[1];
    s->xform[14] = s->pos_mm[2];
    s->xform[15] = 1.0;
    s->buttons = g_buttons;
}

/* One physics step of dt seconds under the motor force (called with g_lock held). */
static void step_stylus(double dt) {
    g_sim_t_s += dt;
    if (g_hand_mode == HAND_TRAJECTORY) {
        double w = 2.0 * M_PI * g_traj_freq_hz;
        for (int i = 0; i < 3; i++) {
            g_pos_m[i] = g_traj_center_m[i] + g_traj_amp_m[i] * sin(w * g_sim_t_s);
            g_vel_m_s[i] = g_traj_amp_m[i] * w * cos(w * g_sim_t_s);
        }
        return;
    }
    for (int i = 0; i < 3; i++) {
        double f = g_motor_force_n[i] - FRICTION_N_S_M * g_vel_m_s[i];
        if (g_hand_mode == HAND_HOLD)
            f += g_hand_k_n_m * (g_hand_anchor_m[i] - g_pos_m[i]) - g_hand_c_n_s_m * g_vel_m_s[i];
        g_vel_m_s[i] += dt * f / TIP_MASS_KG; /* semi-implicit Euler */
        g_pos_m[i] += dt * g_vel_m_s[i];
        double lo = MAX_WORKSPACE_MM[i] * 1e-3, hi = MAX_WORKSPACE_MM[i + 3] * 1e-3;
        if (g_pos_m[i] < lo) { g_pos_m[i] = lo; g_vel_m_s[i] = 0.0; }
        if (g_pos_m[i] > hi) { g_pos_m[i] = hi; g_vel_m_s[i] = 0.0; }
    }
}

/* Commit a frame's force to the motors (called by the outermost hdEndFrame). */
static void commit_force(const double *f) {
    pthread_mutex_lock(&g_lock);
    double norm = 0.0;
    int finite = isfinite(f[0]) && isfinite(f[1]) && isfinite(f[2]);
    double out[3] = {0, 0, 0};
    g_force_commits++;
    if (!finite) {
        g_nonfinite_forces++;
    } else {
        norm = sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]);
        if (norm > g_max_commanded_norm) g_max_commanded_norm = norm;
        double scale = 1.0;
        if (g_clamping && norm > NOMINAL_MAX_FORCE_N) scale = NOMINAL_MAX_FORCE_N / norm;
        for (int i = 0; i < 3; i++) out[i] = g_force_output ? f[i] * scale : 0.0;
    }
    double sent = sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2]);
    if (sent > g_max_sent_norm) g_max_sent_norm = sent;
    if (sent > NOMINAL_MAX_FORCE_N * (1.0 + 1e-9)) g_over_limit_sent++;
    memcpy(g_last_force_n, g_motor_force_n, sizeof g_last_force_n);
    memcpy(g_motor_force_n, out, sizeof out);
    long k = g_log_n++ % MOTOR_LOG;
    g_log_t[k] = now_s();
    memcpy(g_log_f[k], out, sizeof out);
    pthread_mutex_unlock(&g_lock);
    if (!finite) push_error(HD_INVALID_VALUE, 0);
    else if (!g_clamping && g_sw_force_limit && norm > NOMINAL_MAX_FORCE_N) push_error(HD_EXCEEDED_MAX_FORCE, 0);
}

static void run_callbacks(void) {
    pthread_mutex_lock(&g_sched_lock);
    /* Highest priority first: a simple selection over the active slots. */
    int order[MAX_CALLBACKS], n = 0;
    for (int i = 0; i < MAX_CALLBACKS; i++)
        if (g_slots[i].active) order[n++] = i;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (g_slots[order[b]].priority > g_slots[order[a]].priority) {
                int t = order[a]; order[a] = order[b]; order[b] = t;
            }
    for (int k = 0; k < n; k++) {
        Slot *s = &g_slots[order[k]];
        if (!s->active) continue;
        g_callback_calls++;
        HDCallbackCode rc = s->fn(s->user);
        if (rc == HD_CALLBACK_DONE) {
            s->active = 0;
            s->done = 1;
            pthread_cond_broadcast(&g_sched_cond);
        }
    }
    pthread_mutex_unlock(&g_sched_lock);
    if (g_frame_depth != 0) { /* a callback left a frame open */
        g_frame_depth = 0;
        push_error(HD_FRAME_ERROR, 0);
    }
}

static void *servo_main(void *arg) {
    (void)arg;
    /* The HD servo thread runs at real-time priority where the system allows it. */
    const char *no_rt = getenv("LIBHD_DOUBLE_NO_RT");
    if (!(no_rt && no_rt[0] == '1')) {
        struct sched_param sp = {.sched_priority = 80};
        g_realtime = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    long period_ns = 1000000000L / g_rate_hz;
    double last_s = now_s();
    while (g_running) {
        deadline.tv_nsec += period_ns;
        while (deadline.tv_nsec >= 1000000000L) { deadline.tv_nsec -= 1000000000L; deadline.tv_sec++; }
        double deadline_s = (double)deadline.tv_sec + 1e-9 * (double)deadline.tv_nsec;
        /* Asleep before its deadline, a thread woken late was held up by the OS (or the
         * hypervisor), not by the callbacks: counted apart, as the machine's share. */
        int slept_early = now_s() < deadline_s;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        double t = now_s();
        double late = t - deadline_s;
        if (slept_early) {
            if (late > 1.0 / g_rate_hz) g_wake_late_ticks++;
            if (late > g_max_wake_late_s) g_max_wake_late_s = late;
        }
        /* Like a hardware timer, the ticks stay on the absolute 1 ms grid: a late tick
         * runs at once and the next deadline is unchanged (short catch-up). A backlog of
         * more than MAX_BACKLOG periods is dropped and the grid restarts from now. */
        if (late > 1.0 / g_rate_hz) g_late_ticks++;
        if (late > MAX_BACKLOG / (double)g_rate_hz) clock_gettime(CLOCK_MONOTONIC, &deadline);
        double dt = t - last_s;
        g_inst_rate_hz = dt > 0 ? 1.0 / dt : 0.0;
        last_s = t;
        g_tick_start_s = t;
        pthread_mutex_lock(&g_lock);
        /* Integrate the elapsed time in nominal steps (a stalled loop still moves the hand). */
        int steps = (int)lround(dt * g_rate_hz);
        if (steps < 1) steps = 1;
        if (steps > 50) steps = 50;
        for (int i = 0; i < steps; i++) step_stylus(dt / steps);
        g_last_sample = g_sample;
        make_sample(&g_sample);
        g_ticks++;
        pthread_mutex_unlock(&g_lock);
        g_frame_this_tick = 0;
        run_callbacks();
        if (!g_frame_this_tick) {
            static const double zero[3] = {0, 0, 0};
            commit_force(zero);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- device ------ */

HHD hdInitDevice(HDstring name) {
    (void)name;
    const char *absent = getenv("LIBHD_DOUBLE_NO_DEVICE");
    if (absent && absent[0] == '1') {
        push_error(HD_DEVICE_FAULT, -1);
        return HD_INVALID_HANDLE;
    }
    if (g_initialized) {
        push_error(HD_DEVICE_ALREADY_INITIATED, 0);
        return HD_INVALID_HANDLE;
    }
    pthread_mutex_lock(&g_lock);
    g_initialized = 1;
    g_current = DEVICE_HANDLE;
    make_sample(&g_sample);
    g_last_sample = g_sample;
    pthread_mutex_unlock(&g_lock);
    return DEVICE_HANDLE;
}

void hdDisableDevice(HHD h) {
    if (!g_initialized || h != DEVICE_HANDLE) { push_error(HD_BAD_HANDLE, 0); return; }
    g_initialized = 0;
    g_current = HD_INVALID_HANDLE;
    g_force_output = 0;
    g_clamping = 0;
}

HHD hdGetCurrentDevice(void) {
    if (g_current == HD_INVALID_HANDLE) push_error(HD_INVALID_OPERATION, 0);
    return g_current;
}

void hdMakeCurrentDevice(HHD h) {
    if (!g_initialized || h != DEVICE_HANDLE) { push_error(HD_BAD_HANDLE, 0); return; }
    g_current = h;
}

static int *cap_flag(HDenum cap) {
    switch (cap) {
    case HD_FORCE_OUTPUT: return &g_force_output;
    case HD_MAX_FORCE_CLAMPING: return &g_clamping;
    case HD_FORCE_RAMPING: return &g_ramping;
    case HD_SOFTWARE_FORCE_LIMIT: return &g_sw_force_limit;
    default: return NULL;
    }
}

static int check_device(void) {
    if (g_current == HD_INVALID_HANDLE) { push_error(HD_INVALID_OPERATION, 0); return 0; }
    return 1;
}

void hdEnable(HDenum cap) {
    int *flag = cap_flag(cap);
    if (!check_device()) return;
    if (!flag) { push_error(HD_INVALID_ENUM, 0); return; }
    *flag = 1;
}

void hdDisable(HDenum cap) {
    int *flag = cap_flag(cap);
    if (!check_device()) return;
    if (!flag) { push_error(HD_INVALID_ENUM, 0); return; }
    *flag = 0;
}

HDboolean hdIsEnabled(HDenum cap) {
    int *flag = cap_flag(cap);
    if (!flag) { push_error(HD_INVALID_ENUM, 0); return 0; }
    return (HDboolean)(*flag != 0);
}

/* ------------------------------------------------------------- scheduler ------ */

void hdStartScheduler(void) {
    if (g_running) return;
    g_running = 1;
    if (pthread_create(&g_thread, NULL, servo_main, NULL) != 0) {
        g_running = 0;
        push_error(HD_TIMER_ERROR, 0);
    }
}

void hdStopScheduler(void) {
    if (!g_running) return;
    g_running = 0;
    pthread_join(g_thread, NULL);
    pthread_mutex_lock(&g_sched_lock);
    for (int i = 0; i < MAX_CALLBACKS; i++) {
        if (g_slots[i].active) { g_slots[i].active = 0; g_slots[i].done = 1; }
    }
    pthread_cond_broadcast(&g_sched_cond);
    pthread_mutex_unlock(&g_sched_lock);
    pthread_mutex_lock(&g_lock);
    memset(g_motor_force_n, 0, sizeof g_motor_force_n);
    pthread_mutex_unlock(&g_lock);
}

void hdSetSchedulerRate(HDulong rate) {
    if (g_running || rate < 100 || rate > 2000) { push_error(HD_INVALID_VALUE, 0); return; }
    g_rate_hz = (int)rate;
}

static Slot *add_slot(HDSchedulerCallback fn, void *user, HDushort prio, int sync) {
    pthread_mutex_lock(&g_sched_lock);
    for (int i = 0; i < MAX_CALLBACKS; i++) {
        if (!g_slots[i].active) {
            Slot *s = &g_slots[i];
            s->fn = fn; s->user = user; s->priority = prio; s->synchronous = sync;
            s->done = 0; s->handle = g_next_handle++; s->active = 1;
            pthread_mutex_unlock(&g_sched_lock);
            return s;
        }
    }
    pthread_mutex_unlock(&g_sched_lock);
    push_error(HD_SCHEDULER_FULL, 0);
    return NULL;
}

static Slot *find_slot(HDSchedulerHandle h) {
    for (int i = 0; i < MAX_CALLBACKS; i++)
        if (g_slots[i].handle == h) return &g_slots[i];
    return NULL;
}

HDSchedulerHandle hdScheduleAsynchronous(HDSchedulerCallback fn, void *user, HDushort prio) {
    if (!fn) { push_error(HD_INVALID_VALUE, 0); return 0; }
    Slot *s = add_slot(fn, user, prio, 0);
    return s ? s->handle : 0;
}

void hdScheduleSynchronous(HDSchedulerCallback fn, void *user, HDushort prio) {
    if (!fn) { push_error(HD_INVALID_VALUE, 0); return; }
    if (!g_running) { push_error(HD_INVALID_OPERATION, 0); return; }
    if (in_servo_thread()) { push_error(HD_INVALID_OPERATION, 0); return; }
    Slot *s = add_slot(fn, user, prio, 1);
    if (!s) return;
    pthread_mutex_lock(&g_sched_lock);
    while (!s->done) pthread_cond_wait(&g_sched_cond, &g_sched_lock);
    s->handle = 0;
    pthread_mutex_unlock(&g_sched_lock);
}

void hdUnschedule(HDSchedulerHandle h) {
    /* From another thread this waits for the callbacks' current run to finish. */
    pthread_mutex_lock(&g_sched_lock);
    Slot *s = find_slot(h);
    if (!s || h == 0 || !s->active) {
        pthread_mutex_unlock(&g_sched_lock);
        push_error(HD_INVALID_VALUE, 0);
        return;
    }
    s->active = 0;
    s->done = 1;
    pthread_cond_broadcast(&g_sched_cond);
    pthread_mutex_unlock(&g_sched_lock);
}

HDboolean hdWaitForCompletion(HDSchedulerHandle h, HDWaitCode code) {
    pthread_mutex_lock(&g_sched_lock);
    Slot *s = find_slot(h);
    if (!s || h == 0) { pthread_mutex_unlock(&g_sched_lock); return 0; }
    if (code == HD_WAIT_INFINITE)
        while (!s->done && g_running) pthread_cond_wait(&g_sched_cond, &g_sched_lock);
    HDboolean still = (HDboolean)(s->active != 0);
    pthread_mutex_unlock(&g_sched_lock);
    return still; /* HD_TRUE while the callback is still scheduled */
}

HDdouble hdGetSchedulerTimeStamp(void) { return g_running ? now_s() - g_tick_start_s : 0.0; }

/* ---------------------------------------------------------------- frames ------ */

void hdBeginFrame(HHD h) {
    if (!g_initialized || h != DEVICE_HANDLE) { push_error(HD_BAD_HANDLE, 0); return; }
    if (!in_servo_thread()) { push_error(HD_ILLEGAL_BEGIN, 0); return; }
    if (g_frame_depth++ == 0) {
        memset(g_frame_force_n, 0, sizeof g_frame_force_n);
        g_frame_this_tick = 1;
    }
}

void hdEndFrame(HHD h) {
    if (!g_initialized || h != DEVICE_HANDLE) { push_error(HD_BAD_HANDLE, 0); return; }
    if (!in_servo_thread() || g_frame_depth == 0) { push_error(HD_ILLEGAL_END, 0); return; }
    if (--g_frame_depth == 0) commit_force(g_frame_force_n);
}

/* ----------------------------------------------------------------- state ------ */

/* Fill up to 16 doubles for a parameter; returns the count, 0 if unknown. */
static int param_values(HDenum p, double *out) {
    int in_frame = in_servo_thread();
    Sample live;
    const Sample *cur = &g_sample, *last = &g_last_sample;
    if (!in_frame) {
        pthread_mutex_lock(&g_lock);
        make_sample(&live);
        pthread_mutex_unlock(&g_lock);
        cur = &live;
    }
    switch (p) {
    case HD_CURRENT_POSITION: memcpy(out, cur->pos_mm, 3 * sizeof(double)); return 3;
    case HD_LAST_POSITION: memcpy(out, last->pos_mm, 3 * sizeof(double)); return 3;
    case HD_CURRENT_VELOCITY: memcpy(out, cur->vel_mm_s, 3 * sizeof(double)); return 3;
    case HD_LAST_VELOCITY: memcpy(out, last->vel_mm_s, 3 * sizeof(double)); return 3;
    case HD_CURRENT_TRANSFORM: memcpy(out, cur->xform, 16 * sizeof(double)); return 16;
    case HD_LAST_TRANSFORM: memcpy(out, last->xform, 16 * sizeof(double)); return 16;
    case HD_CURRENT_BUTTONS: out[0] = cur->buttons; return 1;
    case HD_LAST_BUTTONS: out[0] = last->buttons; return 1;
    case HD_CURRENT_SAFETY_SWITCH: out[0] = 0; return 1;
    case HD_CURRENT_INKWELL_SWITCH: out[0] = 0; return 1;
    case HD_CURRENT_FORCE: memcpy(out, g_frame_force_n, 3 * sizeof(double)); return 3;
    case HD_LAST_FORCE: memcpy(out, g_motor_force_n, 3 * sizeof(double)); return 3;
    case HD_MAX_WORKSPACE_DIMENSIONS: memcpy(out, MAX_WORKSPACE_MM, 6 * sizeof(double)); return 6;
    case HD_USABLE_WORKSPACE_DIMENSIONS: memcpy(out, USABLE_WORKSPACE_MM, 6 * sizeof(double)); return 6;
    case HD_TABLETOP_OFFSET: out[0] = -110.0; return 1;
    case HD_INPUT_DOF: out[0] = 6; return 1;
    case HD_OUTPUT_DOF: out[0] = 3; return 1;
    case HD_UPDATE_RATE: out[0] = g_rate_hz; return 1;
    case HD_INSTANTANEOUS_UPDATE_RATE: out[0] = g_inst_rate_hz; return 1;
    case HD_NOMINAL_MAX_STIFFNESS: out[0] = NOMINAL_MAX_STIFFNESS_N_MM; return 1;
    case HD_NOMINAL_MAX_DAMPING: out[0] = NOMINAL_MAX_DAMPING_NS_MM; return 1;
    case HD_NOMINAL_MAX_FORCE: out[0] = NOMINAL_MAX_FORCE_N; return 1;
    case HD_NOMINAL_MAX_CONTINUOUS_FORCE: out[0] = NOMINAL_CONTINUOUS_FORCE_N; return 1;
    default: return 0;
    }
}

/* LIBHD_DOUBLE_MINIMAL=1: answer only what pyOpenHaptics 1.0.1 itself queries (buttons,
 * transform; identification strings), like a minimal emulator. */
static int minimal_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *env = getenv("LIBHD_DOUBLE_MINIMAL");
        mode = env && env[0] == '1';
    }
    return mode;
}

static int get_values(HDenum p, double *vals) {
    if (!check_device()) return 0;
    if (minimal_mode() && p != HD_CURRENT_BUTTONS && p != HD_CURRENT_TRANSFORM) {
        push_error(HD_INVALID_ENUM, 0);
        return 0;
    }
    int n = param_values(p, vals);
    if (n == 0) push_error(HD_INVALID_ENUM, 0);
    return n;
}

void hdGetDoublev(HDenum p, HDdouble *v) {
    double vals[16];
    int n = get_values(p, vals);
    for (int i = 0; i < n; i++) v[i] = vals[i];
}

void hdGetFloatv(HDenum p, HDfloat *v) {
    double vals[16];
    int n = get_values(p, vals);
    for (int i = 0; i < n; i++) v[i] = (HDfloat)vals[i];
}

void hdGetIntegerv(HDenum p, HDint *v) {
    double vals[16];
    int n = get_values(p, vals);
    for (int i = 0; i < n; i++) v[i] = (HDint)lround(vals[i]);
}

void hdGetLongv(HDenum p, HDlong *v) {
    double vals[16];
    int n = get_values(p, vals);
    for (int i = 0; i < n; i++) v[i] = (HDlong)lround(vals[i]);
}

void hdGetBooleanv(HDenum p, HDboolean *v) {
    double vals[16];
    int n = get_values(p, vals);
    for (int i = 0; i < n; i++) v[i] = (HDboolean)(vals[i] != 0.0);
}

HDstring hdGetString(HDenum p) {
    switch (p) {
    case HD_VERSION: return "3.30.0 (capture-trainer libHD test double)";
    case HD_DEVICE_MODEL_TYPE: return "Touch";
    case HD_DEVICE_VENDOR: return "3D Systems";
    case HD_DEVICE_SERIAL_NUMBER: return "DOUBLE-0001";
    case HD_DEVICE_DRIVER_VERSION: return "5.0.0";
    case HD_DEVICE_FIRMWARE_VERSION: return "0.0";
    default: push_error(HD_INVALID_ENUM, 0); return "";
    }
}

static void set_force(const double *f) {
    if (!in_servo_thread() || g_frame_depth == 0) { push_error(HD_INVALID_OPERATION, 0); return; }
    memcpy(g_frame_force_n, f, 3 * sizeof(double));
}

void hdSetDoublev(HDenum p, const HDdouble *v) {
    if (!check_device()) return;
    if (p == HD_CURRENT_FORCE) set_force(v);
    else push_error(HD_INVALID_ENUM, 0);
}

void hdSetFloatv(HDenum p, const HDfloat *v) {
    double f[3] = {v[0], v[1], v[2]};
    if (!check_device()) return;
    if (p == HD_CURRENT_FORCE) set_force(f);
    else push_error(HD_INVALID_ENUM, 0);
}

void hdSetIntegerv(HDenum p, const HDint *v) {
    (void)v;
    if (!check_device()) return;
    push_error(p == HD_CURRENT_FORCE ? HD_INVALID_INPUT_TYPE : HD_INVALID_ENUM, 0);
}

/* ---------------------------------------------------------------- errors ------ */

HDErrorInfo hdGetError(void) {
    HDErrorInfo e = {HD_SUCCESS, 0, HD_INVALID_HANDLE};
    pthread_mutex_lock(&g_lock);
    if (g_n_errors > 0) e = g_errors[--g_n_errors];
    pthread_mutex_unlock(&g_lock);
    return e;
}

HDstring hdGetErrorString(HDerror code) {
    switch (code) {
    case HD_SUCCESS: return "No error";
    case HD_INVALID_ENUM: return "Invalid enumeration";
    case HD_INVALID_VALUE: return "Invalid value";
    case HD_INVALID_OPERATION: return "Invalid operation";
    case HD_INVALID_INPUT_TYPE: return "Invalid input type";
    case HD_BAD_HANDLE: return "Bad handle";
    case HD_WARM_MOTORS: return "Motors are warm";
    case HD_EXCEEDED_MAX_FORCE: return "Exceeded max force";
    case HD_EXCEEDED_MAX_FORCE_IMPULSE: return "Exceeded max force impulse";
    case HD_EXCEEDED_MAX_VELOCITY: return "Exceeded max velocity";
    case HD_FORCE_ERROR: return "Force error";
    case HD_DEVICE_FAULT: return "Device fault";
    case HD_DEVICE_ALREADY_INITIATED: return "Device already initiated";
    case HD_COMM_ERROR: return "Communication error";
    case HD_COMM_CONFIG_ERROR: return "Communication configuration error";
    case HD_TIMER_ERROR: return "Timer error";
    case HD_ILLEGAL_BEGIN: return "Illegal begin frame";
    case HD_ILLEGAL_END: return "Illegal end frame";
    case HD_FRAME_ERROR: return "Frame error";
    case HD_INVALID_PRIORITY: return "Invalid priority";
    case HD_SCHEDULER_FULL: return "Scheduler full";
    case HD_INVALID_LICENSE: return "Invalid license";
    default: return "Unknown error";
    }
}

/* ------------------------------------------------------- test-only control ---- */

/* Hand modes: 0 none (free stylus), 1 compliant hold at anchor_mm, 2 trajectory. */
void hdd_set_hand_hold(const double anchor_mm[3], double k_n_m, double c_n_s_m) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 3; i++) g_hand_anchor_m[i] = anchor_mm[i] * 1e-3;
    g_hand_k_n_m = k_n_m;
    g_hand_c_n_s_m = c_n_s_m;
    g_hand_mode = HAND_HOLD;
    pthread_mutex_unlock(&g_lock);
}

void hdd_set_hand_free(void) {
    pthread_mutex_lock(&g_lock);
    g_hand_mode = HAND_NONE;
    pthread_mutex_unlock(&g_lock);
}

/* position = center + amplitude * sin(2 pi f t), per axis, t = time since this call. */
void hdd_set_hand_trajectory(const double center_mm[3], const double amplitude_mm[3], double freq_hz) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 3; i++) {
        g_traj_center_m[i] = center_mm[i] * 1e-3;
        g_traj_amp_m[i] = amplitude_mm[i] * 1e-3;
    }
    g_traj_freq_hz = freq_hz;
    g_sim_t_s = 0.0;
    g_hand_mode = HAND_TRAJECTORY;
    step_stylus(0.0);
    pthread_mutex_unlock(&g_lock);
}

void hdd_set_stylus(const double pos_mm[3], const double vel_mm_s[3]) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 3; i++) {
        g_pos_m[i] = pos_mm[i] * 1e-3;
        g_vel_m_s[i] = vel_mm_s[i] * 1e-3;
    }
    pthread_mutex_unlock(&g_lock);
}

void hdd_get_stylus(double pos_mm[3], double vel_mm_s[3]) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 3; i++) {
        pos_mm[i] = g_pos_m[i] * 1e3;
        vel_mm_s[i] = g_vel_m_s[i] * 1e3;
    }
    pthread_mutex_unlock(&g_lock);
}

/* Row-major 3x3 rotation of the stylus (device frame). */
void hdd_set_orientation(const double rot_row_major[9]) {
    pthread_mutex_lock(&g_lock);
    memcpy(g_rot, rot_row_major, sizeof g_rot);
    pthread_mutex_unlock(&g_lock);
}

void hdd_set_buttons(int mask) {
    pthread_mutex_lock(&g_lock);
    g_buttons = mask;
    pthread_mutex_unlock(&g_lock);
}

void hdd_inject_error(unsigned int code, int internal) { push_error(code, internal); }

/* The double's clock: CLOCK_MONOTONIC [s], the clock of the motor log. */
double hdd_now_s(void) { return now_s(); }

/* The last commits to the motors, oldest first: up to max of them, committed at or after
 * since_s [s]; t_out[i] when, f_out[3 i .. 3 i + 2] the force [N]. Returns the count. */
long hdd_motor_log(double since_s, double *t_out, double *f_out, long max) {
    pthread_mutex_lock(&g_lock);
    long n = g_log_n < MOTOR_LOG ? g_log_n : MOTOR_LOG;
    long first = g_log_n - n, count = 0;
    for (long j = first; j < g_log_n && count < max; j++) {
        long k = j % MOTOR_LOG;
        if (g_log_t[k] < since_s) continue;
        t_out[count] = g_log_t[k];
        memcpy(&f_out[3 * count], g_log_f[k], 3 * sizeof(double));
        count++;
    }
    pthread_mutex_unlock(&g_lock);
    return count;
}

/* The force the motors are sending now (N). */
void hdd_motor_force(double out[3]) {
    pthread_mutex_lock(&g_lock);
    memcpy(out, g_motor_force_n, sizeof g_motor_force_n);
    pthread_mutex_unlock(&g_lock);
}

typedef struct {
    long ticks;            /* scheduler ticks since load */
    long late_ticks;       /* ticks that missed their deadline by more than a period */
    long callback_calls;   /* callback invocations */
    long force_commits;    /* forces committed (frames + zero for frameless ticks) */
    long nonfinite_forces; /* commits with a NaN/inf component (sent as zero) */
    long over_limit_sent;  /* commits whose sent norm exceeded the nominal max force */
    double max_sent_norm_n;      /* largest norm sent to the motors */
    double max_commanded_norm_n; /* largest finite norm written with HD_CURRENT_FORCE */
    int force_output_enabled;
    int clamping_enabled;
    long wake_late_ticks;    /* late ticks whose thread went to sleep before the deadline */
    double max_wake_late_s;  /* the latest such wake-up after its deadline [s] */
    int realtime;            /* the scheduler thread runs SCHED_FIFO */
} HddStats;

void hdd_stats(HddStats *out) {
    pthread_mutex_lock(&g_lock);
    out->ticks = g_ticks;
    out->late_ticks = g_late_ticks;
    out->callback_calls = g_callback_calls;
    out->force_commits = g_force_commits;
    out->nonfinite_forces = g_nonfinite_forces;
    out->over_limit_sent = g_over_limit_sent;
    out->max_sent_norm_n = g_max_sent_norm;
    out->max_commanded_norm_n = g_max_commanded_norm;
    out->force_output_enabled = g_force_output;
    out->clamping_enabled = g_clamping;
    out->wake_late_ticks = g_wake_late_ticks;
    out->max_wake_late_s = g_max_wake_late_s;
    out->realtime = g_realtime;
    pthread_mutex_unlock(&g_lock);
}

void hdd_reset_stats(void) {
    pthread_mutex_lock(&g_lock);
    g_force_commits = g_nonfinite_forces = g_over_limit_sent = 0;
    g_max_sent_norm = g_max_commanded_norm = 0.0;
    g_wake_late_ticks = 0;
    g_max_wake_late_s = 0.0;
    pthread_mutex_unlock(&g_lock);
}
