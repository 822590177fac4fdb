/* One PyBullet plant step through PyBullet's own C API, for the fused servo tick.
 *
 * The fused tick's plant stage in Python is five to seven calls into the pybullet module
 * (the joint motor command, the step, three state queries for the arm and one or two for
 * the debris); each query is a full actual-state round trip of the physics server. This
 * file does the same commands in one call: the motor command (velocity control, the same
 * per-joint targets, gains and force limits as ``setJointMotorControlArray``), one
 * ``stepSimulation``, and one actual-state request per body, whose joint positions and
 * velocities, base pose and base velocity are copied into the caller's buffers in the
 * layout of ``robot._kernels.plant_load``. PyBullet's functions are not linked: the
 * caller passes their addresses (resolved from the loaded pybullet module) in the struct,
 * so this file needs no Bullet headers and runs against the module's own connection.
 *
 * Nothing is allocated and nothing blocks; a non-finite command is refused before it
 * reaches the plant (CT_PLANT_NONFINITE), and a status other than the one expected
 * returns its own code.
 */
#include <math.h>
#include <stdint.h>

typedef void *handle;

typedef struct {
    handle (*joint_control_init)(handle client, int body, int mode);
    int (*set_desired_velocity)(handle command, int dof, double value);
    int (*set_kd)(handle command, int dof, double value);
    int (*set_maximum_force)(handle command, int dof, double value);
    handle (*submit)(handle client, handle command);
    int (*status_type)(handle status);
    handle (*step_init)(handle client);
    handle (*actual_state_init)(handle client, int body);
    int (*actual_state)(handle status, int *body, int *n_q, int *n_u, const double **inertial_frame,
                        const double **q, const double **qd, const double **reaction);
} ct_pybullet_api;

#define CT_MAX_JOINTS 16

typedef struct {
    const ct_pybullet_api *api;
    handle client;
    int64_t arm_body;
    int64_t n_joints;
    int64_t control_mode;            /* PyBullet's VELOCITY_CONTROL */
    int64_t status_step_completed;   /* CMD_STEP_FORWARD_SIMULATION_COMPLETED */
    int64_t status_state_completed;  /* CMD_ACTUAL_STATE_UPDATE_COMPLETED */
    int64_t q_index[CT_MAX_JOINTS];  /* getJointInfo's qIndex and uIndex of each joint */
    int64_t u_index[CT_MAX_JOINTS];
    const double *targets;           /* [n] joint velocity targets [rad/s] */
    const double *forces;            /* [n] velocity motors' force limits [N m] */
    double kd;                       /* PyBullet's velocity gain (its default, 1.0) */
    double *arm_state;               /* [2n + 13] after the step (plant_load's layout) */
    double *arm_before;              /* [2n + 13] takes arm_state's old values first */
    int64_t debris_body;             /* -1: none */
    double *debris_state;            /* [13] centre, quaternion xyzw, velocity, spin */
} ct_plant;

enum {
    CT_PLANT_OK = 0,
    CT_PLANT_NONFINITE = 1,
    CT_PLANT_STEP_FAILED = 2,
    CT_PLANT_READ_FAILED = 3,
};

/* One actual-state request of body: its q and qd arrays (base first: 7 and 6 values). */
static int read_body(const ct_plant *p, int64_t body, const double **q, const double **qd)
{
    const ct_pybullet_api *api = p->api;
    handle status = api->submit(p->client, api->actual_state_init(p->client, (int)body));
    if (api->status_type(status) != p->status_state_completed)
        return CT_PLANT_READ_FAILED;
    if (!api->actual_state(status, 0, 0, 0, 0, q, qd, 0))
        return CT_PLANT_READ_FAILED;
    return CT_PLANT_OK;
}

static void copy_base(double *out, const double *q, const double *qd)
{
    for (int i = 0; i < 7; ++i)
        out[i] = q[i];
    for (int i = 0; i < 6; ++i)
        out[7 + i] = qd[i];
}

/* Read the arm, and the debris by debris_mode (0: not; 1: its pose only, its velocities
 * left as they are; 2: its pose and velocities), without stepping. */
int ct_plant_read(const ct_plant *p, int64_t debris_mode)
{
    const double *q, *qd;
    int n = (int)p->n_joints, rc = read_body(p, p->arm_body, &q, &qd);
    if (rc != CT_PLANT_OK)
        return rc;
    for (int j = 0; j < 2 * n + 13; ++j)
        p->arm_before[j] = p->arm_state[j];
    for (int j = 0; j < n; ++j) {
        p->arm_state[j] = q[p->q_index[j]];
        p->arm_state[n + j] = qd[p->u_index[j]];
    }
    copy_base(p->arm_state + 2 * n, q, qd);
    if (p->debris_body >= 0 && debris_mode > 0) {
        rc = read_body(p, p->debris_body, &q, &qd);
        if (rc != CT_PLANT_OK)
            return rc;
        if (debris_mode == 2) {
            copy_base(p->debris_state, q, qd);
        } else {
            for (int i = 0; i < 7; ++i)
                p->debris_state[i] = q[i];
        }
    }
    return CT_PLANT_OK;
}

/* The motor command, one step, then ct_plant_read. */
int ct_plant_step(const ct_plant *p, int64_t debris_mode)
{
    const ct_pybullet_api *api = p->api;
    int n = (int)p->n_joints;
    for (int j = 0; j < n; ++j)
        if (!isfinite(p->targets[j]) || !isfinite(p->forces[j]))
            return CT_PLANT_NONFINITE;
    handle command = api->joint_control_init(p->client, (int)p->arm_body, (int)p->control_mode);
    for (int j = 0; j < n; ++j) {
        int dof = (int)p->u_index[j];
        api->set_desired_velocity(command, dof, p->targets[j]);
        api->set_kd(command, dof, p->kd);
        api->set_maximum_force(command, dof, p->forces[j]);
    }
    api->submit(p->client, command);
    handle status = api->submit(p->client, api->step_init(p->client));
    if (api->status_type(status) != p->status_step_completed)
        return CT_PLANT_STEP_FAILED;
    return ct_plant_read(p, debris_mode);
}
