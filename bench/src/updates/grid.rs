//! The grids of `cuqr bench updates`: every point of the seeds' experiment grids
//! (BS, AC-k3, AC-k6, AC-stage, AC-p, RC-k, RC-m, AR-p, AR-n, AR-m, RR-seq, RR-n,
//! RR-m, RR-comp, ACC) with the seeds' published figures, the `--quick` grid, and the
//! required speed-up (the bar) at each point.

use cuqr::QPolicy;

/// The five updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::InsertCols => "insert_cols",
            Kind::DeleteCols => "delete_cols",
            Kind::InsertRows => "insert_rows",
            Kind::DeleteRows => "delete_rows",
            Kind::RankOne => "rank_one",
        }
    }

    /// The seeds' TUS protocol: Q is omitted for row addition and
    /// column removal.
    pub(super) fn policy(self) -> QPolicy {
        match self {
            Kind::DeleteCols | Kind::InsertRows => QPolicy::None,
            _ => QPolicy::Full,
        }
    }

    /// (m′, n′) after the update.
    pub(super) fn new_dims(self, m: usize, n: usize, p: usize) -> (usize, usize) {
        match self {
            Kind::InsertCols => (m, n + p),
            Kind::DeleteCols => (m, n - p),
            Kind::InsertRows => (m + p, n),
            Kind::DeleteRows => (m - p, n),
            Kind::RankOne => (m, n),
        }
    }
}

/// The seeds' figures of the groups whose tables are not speed-ups.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Extra {
    None,
    /// RR-comp: the seeds' composite and three-stream
    /// (non-composite) row removal, seconds.
    Comp {
        composite_s: f64,
        streams_s: f64,
    },
    /// ACC: the seeds' GPU e_x, and e_Q, e_A where Q is formed (f32).
    Acc {
        e_x: f64,
        e_q: Option<f64>,
        e_a: Option<f64>,
    },
    /// BS: the seeds' sequential time and GPU TUT time at this n_b, seconds.
    Bs {
        seq_s: f64,
        tut_s: Option<f64>,
    },
}

/// A point of a grid.
#[derive(Clone, Copy, Debug)]
pub(super) struct Point {
    pub group: &'static str,
    pub kind: Kind,
    pub m: usize,
    pub n: usize,
    pub k0: usize,
    pub p: usize,
    /// Run the serial CPU update (and faer) here.
    pub cpu: bool,
    /// The seeds' CULA/TUS speed-up at this point, if given.
    pub seed_cula: Option<f64>,
    /// The seeds' seq/TUT speed-up at this point, if given.
    pub seed_seq: Option<f64>,
    /// The update's Householder block size n_b (BS group); `None`: the default.
    pub nb: Option<usize>,
    pub extra: Extra,
}

impl Point {
    pub(super) fn new(
        group: &'static str,
        kind: Kind,
        m: usize,
        n: usize,
        k0: usize,
        p: usize,
    ) -> Self {
        Point {
            group,
            kind,
            m,
            n,
            k0,
            p,
            cpu: false,
            seed_cula: None,
            seed_seq: None,
            nb: None,
            extra: Extra::None,
        }
    }
    /// With the serial CPU update and faer columns.
    pub(super) fn cpu(self) -> Self {
        Point { cpu: true, ..self }
    }
    /// The seeds' CULA time and TUS time (seconds).
    pub(super) fn cula(self, cula_s: f64, tus_s: f64) -> Self {
        Point {
            seed_cula: Some(cula_s / tus_s),
            ..self
        }
    }
    /// The seeds' sequential time and TUT time (seconds).
    pub(super) fn seq(self, seq_s: f64, tut_s: f64) -> Self {
        Point {
            seed_seq: Some(seq_s / tut_s),
            ..self
        }
    }
    fn nb(self, nb: usize) -> Self {
        Point {
            nb: Some(nb),
            ..self
        }
    }
    fn extra(self, extra: Extra) -> Self {
        Point { extra, ..self }
    }
    /// Whether the update keeps Q (the seeds' TUS protocol).
    pub(super) fn keeps_q(&self) -> bool {
        self.kind.policy() == QPolicy::Full
    }
}

/// The groups of the full grid, in order.
pub(super) const GROUPS: [&str; 16] = [
    "BS", "AC-k3", "AC-k6", "AC-stage", "AC-p", "RC-k", "RC-m", "AR-p", "AR-n", "AR-m", "RR-seq",
    "RR-n", "RR-m", "RR-comp", "ACC", "R1",
];

/// The quick grid: every update at m = 1200, n = 500.
pub(super) fn quick_grid() -> Vec<Point> {
    use Kind::*;
    let (m, n) = (1200, 500);
    let q = |g, k, k0, p| Point::new(g, k, m, n, k0, p).cpu();
    vec![
        q("AC", InsertCols, 0, 20),
        q("AC", InsertCols, 250, 20),
        q("AC", InsertCols, 500, 20),
        q("RC", DeleteCols, 0, 20),
        q("RC", DeleteCols, 480, 20),
        q("AR", InsertRows, 0, 20),
        q("AR", InsertRows, 0, 100),
        q("RR", DeleteRows, 0, 20),
        q("R1", RankOne, 0, 1),
    ]
}

/// The full grid: every point of the seeds' experiment grids, with the seeds'
/// figures, plus two rank-one points (the seeds have no rank-one experiment). The
/// CPU columns run where the CPU bar applies (RR-seq, AC-k3, AR-p) and at the small
/// rank-one point.
pub(super) fn full_grid() -> Vec<Point> {
    [
        block_size_points(),
        column_insertion_points(),
        column_deletion_points(),
        row_insertion_points(),
        row_deletion_points(),
        accuracy_points(),
        rank_one_points(),
    ]
    .concat()
}

/// BS: the update's Householder block size n_b = 1, 10, 50, 100, 200, 500 at
/// m = 4000, with the seeds' sequential and GPU TUT seconds.
#[allow(clippy::type_complexity)]
fn block_size_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    let nbs = [1, 10, 50, 100, 200, 500];
    let bs: [(Kind, usize, usize, usize, [f64; 6], [f64; 5]); 3] = [
        (
            InsertRows,
            1000,
            250,
            200,
            [0.368, 0.370, 0.382, 0.435, 0.514, 0.777],
            [0.194, 0.175, 0.175, 0.185, 0.214],
        ),
        (
            InsertCols,
            1000,
            250,
            1000,
            [8.506, 8.526, 8.638, 8.763, 8.999, 9.693],
            [0.389, 0.285, 0.280, 0.288, 0.336],
        ),
        (
            DeleteCols,
            1200,
            0,
            200,
            [0.232, 0.241, 0.292, 0.353, 0.476, 0.713],
            [0.201, 0.183, 0.182, 0.190, 0.235],
        ),
    ];
    for (kind, n, k0, p, seq, tut) in bs {
        for (i, nb) in nbs.into_iter().enumerate() {
            let tut_s = i.checked_sub(1).map(|j| tut[j]);
            let mut x = Point::new("BS", kind, 4000, n, k0, p)
                .nb(nb)
                .extra(Extra::Bs {
                    seq_s: seq[i],
                    tut_s,
                });
            if let Some(t) = tut_s {
                x = x.seq(seq[i], t);
            }
            g.push(x);
        }
    }
    g
}

/// Column insertion: against k0 at n = 3000 (AC-k3, with the CPU columns) and
/// n = 6000 (AC-k6), the stage breakdown (AC-stage) and against p (AC-p).
#[allow(clippy::type_complexity)]
fn column_insertion_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    // AC-k3: n = 3000, p = 200, k0 = 0..3000 step 500.
    let ac3: [(usize, f64, [f64; 7], [Option<f64>; 7], [f64; 7]); 3] = [
        (
            4000,
            0.380,
            [2.357, 1.887, 1.464, 1.075, 0.725, 0.404, 0.155],
            [
                Some(102.347),
                Some(81.432),
                Some(61.654),
                Some(42.123),
                Some(28.622),
                Some(16.647),
                Some(5.846),
            ],
            [2.380, 1.912, 1.478, 1.086, 0.739, 0.439, 0.172],
        ),
        (
            8000,
            1.000,
            [3.867, 3.219, 2.636, 2.046, 1.499, 1.021, 0.613],
            // the seeds report no sequential time at m = 8000, k0 = 0
            [
                None,
                Some(137.077),
                Some(112.467),
                Some(89.610),
                Some(68.869),
                Some(49.776),
                Some(32.932),
            ],
            [3.949, 3.311, 2.697, 2.167, 1.649, 1.162, 0.735],
        ),
        (
            12000,
            1.594,
            [5.670, 4.825, 4.048, 3.360, 2.667, 1.941, 1.445],
            [
                Some(259.746),
                Some(226.277),
                Some(192.782),
                Some(163.276),
                Some(135.380),
                Some(108.846),
                Some(83.457),
            ],
            [5.929, 5.079, 4.348, 3.551, 2.917, 2.280, 1.737],
        ),
    ];
    for (m, cula, tus, seq, tut) in ac3 {
        for i in 0..7 {
            let mut x = Point::new("AC-k3", InsertCols, m, 3000, 500 * i, 200)
                .cpu()
                .cula(cula, tus[i]);
            if let Some(s) = seq[i] {
                x = x.seq(s, tut[i]);
            }
            g.push(x);
        }
    }

    // AC-k6: n = 6000, p = 200, k0 = 0..6000 step 500.
    let ac6: [(usize, f64, [f64; 13]); 3] = [
        (
            8000,
            1.797,
            [
                8.585, 7.670, 6.730, 5.951, 5.112, 4.393, 3.720, 3.068, 2.458, 1.876, 1.388, 0.911,
                0.503,
            ],
        ),
        (
            12000,
            3.003,
            [
                11.385, 10.280, 9.162, 8.152, 7.249, 6.307, 5.423, 4.562, 3.865, 3.055, 2.414,
                1.675, 1.177,
            ],
        ),
        (
            16000,
            4.241,
            [
                14.458, 13.184, 11.930, 10.642, 9.639, 8.551, 7.512, 6.534, 5.425, 4.660, 3.717,
                2.953, 2.187,
            ],
        ),
    ];
    for (m, cula, tus) in ac6 {
        for (i, t) in tus.into_iter().enumerate() {
            g.push(Point::new("AC-k6", InsertCols, m, 6000, 500 * i, 200).cula(cula, t));
        }
    }

    // AC-stage (the seeds' stage breakdown; the stage split runs at these points):
    // m = 16000, n = 6000.
    for (k0, tus) in [(500, 13.184), (5500, 2.953)] {
        g.push(Point::new("AC-stage", InsertCols, 16000, 6000, k0, 200).cula(4.241, tus));
    }

    // AC-p: n = 3000, k0 = 2980, p = 100..1500 step 200.
    let acp: [(usize, [f64; 8], [f64; 8], [f64; 8], [f64; 8]); 2] = [
        (
            5000,
            [0.500, 0.528, 0.555, 0.564, 0.603, 0.620, 0.648, 0.683],
            [0.180, 0.323, 0.428, 0.526, 0.643, 0.731, 0.848, 0.954],
            [
                5.410, 15.837, 26.001, 35.988, 45.503, 54.726, 63.853, 72.324,
            ],
            [0.216, 0.348, 0.448, 0.586, 0.685, 0.767, 0.888, 0.974],
        ),
        (
            8000,
            [0.870, 0.919, 0.973, 1.028, 1.085, 1.149, 1.221, 1.230],
            [0.386, 0.732, 0.967, 1.198, 1.392, 1.606, 1.885, 2.027],
            [
                19.225, 57.924, 83.385, 133.165, 172.120, 205.736, 246.458, 277.459,
            ],
            [0.498, 0.866, 1.060, 1.326, 1.523, 1.763, 2.001, 2.181],
        ),
    ];
    for (m, cula, tus, seq, tut) in acp {
        for i in 0..8 {
            g.push(
                Point::new("AC-p", InsertCols, m, 3000, 2980, 100 + 200 * i)
                    .cula(cula[i], tus[i])
                    .seq(seq[i], tut[i]),
            );
        }
    }
    g
}

/// Column deletion: against k0 for three p (RC-k) and against m (RC-m).
// The seeds' figures as printed (0.318 s is a timing, not 1/π).
#[allow(clippy::approx_constant)]
fn column_deletion_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    // RC-k: m = 6000, n = 3000, p = 100, 200, 500.
    type RcK<'a> = (usize, f64, &'a [usize], &'a [f64], &'a [f64], &'a [f64]);
    let rck: [RcK<'_>; 3] = [
        (
            100,
            0.662,
            &[0, 500, 1000, 1500, 2000, 2500, 2900],
            &[0.601, 0.526, 0.417, 0.312, 0.212, 0.111, 0.050],
            &[1.260, 0.811, 0.557, 0.315, 0.145, 0.049, 0.026],
            &[0.640, 0.520, 0.426, 0.318, 0.208, 0.124, 0.054],
        ),
        (
            200,
            0.631,
            &[0, 500, 1000, 1500, 2000, 2500, 2800],
            &[0.605, 0.482, 0.387, 0.287, 0.189, 0.101, 0.047],
            &[1.886, 1.282, 0.796, 0.429, 0.178, 0.046, 0.024],
            &[0.609, 0.489, 0.392, 0.289, 0.190, 0.106, 0.048],
        ),
        (
            500,
            0.565,
            &[0, 500, 1000, 1500, 2000, 2500],
            &[0.609, 0.479, 0.353, 0.239, 0.136, 0.042],
            &[3.987, 2.358, 1.455, 0.664, 0.186, 0.025],
            &[0.611, 0.481, 0.359, 0.239, 0.139, 0.055],
        ),
    ];
    for (p, cula, k0s, tus, seq, tut) in rck {
        for i in 0..k0s.len() {
            g.push(
                Point::new("RC-k", DeleteCols, 6000, 3000, k0s[i], p)
                    .cula(cula, tus[i])
                    .seq(seq[i], tut[i]),
            );
        }
    }

    // RC-m: n = 3000, k0 = 0, p = 500, m = 6000..12000 step 1000.
    let rcm_cula = [0.562, 0.672, 0.753, 0.871, 0.959, 1.101, 1.193];
    let rcm_tus = [0.591, 0.600, 0.592, 0.596, 0.597, 0.616, 0.620];
    g.extend(with_cula(&rcm_cula, &rcm_tus, |i| {
        Point::new("RC-m", DeleteCols, 6000 + 1000 * i, 3000, 0, 500)
    }));
    g
}

/// Row insertion: against p (AR-p, with the CPU columns), n (AR-n) and m (AR-m).
#[allow(clippy::type_complexity)]
fn row_insertion_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    // AR-p: m = 8000, k0 = 0, p = 100..1500 step 200.
    let arp: [(usize, [f64; 8], [f64; 8], [f64; 8], [f64; 8]); 3] = [
        (
            1000,
            [0.316, 0.322, 0.328, 0.341, 0.343, 0.359, 0.367, 0.370],
            [0.194, 0.200, 0.205, 0.214, 0.223, 0.239, 0.245, 0.249],
            [0.375, 1.020, 1.622, 2.181, 2.953, 3.501, 4.240, 4.840],
            [0.203, 0.203, 0.218, 0.227, 0.233, 0.244, 0.251, 0.267],
        ),
        (
            2000,
            [0.611, 0.627, 0.641, 0.658, 0.673, 0.687, 0.690, 0.717],
            [0.393, 0.409, 0.433, 0.458, 0.485, 0.518, 0.536, 0.574],
            [1.296, 3.506, 5.727, 7.960, 10.255, 12.493, 14.839, 17.578],
            [0.408, 0.422, 0.443, 0.476, 0.499, 0.526, 0.545, 0.591],
        ),
        (
            3000,
            [0.958, 1.008, 1.025, 1.039, 1.089, 1.115, 1.140, 1.136],
            [0.609, 0.660, 0.698, 0.757, 0.824, 0.876, 0.925, 0.968],
            [2.904, 7.894, 12.909, 18.179, 23.764, 28.877, 34.577, 41.810],
            [0.629, 0.674, 0.723, 0.781, 0.827, 0.872, 0.935, 0.995],
        ),
    ];
    for (n, cula, tus, seq, tut) in arp {
        for i in 0..8 {
            g.push(
                Point::new("AR-p", InsertRows, 8000, n, 0, 100 + 200 * i)
                    .cpu()
                    .cula(cula[i], tus[i])
                    .seq(seq[i], tut[i]),
            );
        }
    }

    // AR-n: m = 8000, n = 1000..7000 step 1000, p = 200 and 1500.
    let arn: [(usize, [f64; 7], [f64; 7]); 2] = [
        (
            200,
            [0.321, 0.611, 0.981, 1.383, 1.802, 2.265, 2.746],
            [0.192, 0.398, 0.627, 0.908, 1.200, 1.551, 1.931],
        ),
        (
            1500,
            [0.373, 0.730, 1.137, 1.654, 2.219, 2.807, 3.414],
            [0.253, 0.589, 0.986, 1.482, 2.075, 2.754, 3.485],
        ),
    ];
    for (p, cula, tus) in arn {
        g.extend(with_cula(&cula, &tus, |i| {
            Point::new("AR-n", InsertRows, 8000, 1000 + 1000 * i, 0, p)
        }));
    }

    // AR-m: n = 3000, p = 500, m = 8000..14000 step 1000.
    let arm_cula = [1.174, 1.300, 1.440, 1.583, 1.717, 1.845, 2.002];
    let arm_tus = [1.006, 0.991, 1.021, 1.015, 1.019, 0.999, 1.040];
    g.extend(with_cula(&arm_cula, &arm_tus, |i| {
        Point::new("AR-m", InsertRows, 8000 + 1000 * i, 3000, 0, 500)
    }));
    g
}

/// Row deletion: against p (RR-seq, with the CPU columns), n (RR-n) and m (RR-m),
/// and the seeds' row-removal layouts (RR-comp).
fn row_deletion_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    // RR-seq: n = 1000, p = 20..100 step 20.
    let rrs: [(usize, [f64; 5], [f64; 5]); 3] = [
        (
            2000,
            [1.954, 3.850, 5.740, 7.642, 9.483],
            [0.218, 0.271, 0.319, 0.363, 0.414],
        ),
        (
            4000,
            [6.605, 11.296, 16.847, 23.769, 32.244],
            [0.519, 0.663, 0.838, 1.001, 1.158],
        ),
        (
            6000,
            [12.439, 24.538, 36.669, 48.711, 60.760],
            [0.904, 1.245, 1.557, 1.889, 2.213],
        ),
    ];
    for (m, seq, tut) in rrs {
        for i in 0..5 {
            g.push(
                Point::new("RR-seq", DeleteRows, m, 1000, 0, 20 + 20 * i)
                    .cpu()
                    .seq(seq[i], tut[i]),
            );
        }
    }

    // RR-n: m = 12000, n = 6000, 8000, 10000; then RR-m: n = 6000, m = 8000, 12000,
    // 16000. Each (group, m, n) with the seeds' CULA and TUS seconds at p = 20..100.
    let cula_series: [CulaSeries; 6] = [
        (
            "RR-n",
            12000,
            6000,
            [2.999, 2.895, 2.963, 2.921, 2.954],
            [3.068, 4.646, 6.417, 8.111, 9.752],
        ),
        (
            "RR-n",
            12000,
            8000,
            [4.240, 4.185, 4.202, 4.088, 4.144],
            [3.325, 5.189, 6.989, 8.851, 10.706],
        ),
        (
            "RR-n",
            12000,
            10000,
            [5.680, 5.563, 5.631, 5.435, 5.575],
            [3.592, 5.631, 7.674, 9.679, 11.742],
        ),
        (
            "RR-m",
            8000,
            6000,
            [1.745, 1.775, 1.773, 1.757, 1.713],
            [1.736, 2.635, 3.501, 4.371, 5.181],
        ),
        (
            "RR-m",
            12000,
            6000,
            [2.999, 2.895, 2.963, 2.921, 2.954],
            [3.068, 4.646, 6.417, 8.111, 9.752],
        ),
        (
            "RR-m",
            16000,
            6000,
            [4.197, 4.176, 4.205, 4.116, 4.116],
            [4.587, 7.266, 10.064, 12.773, 15.335],
        ),
    ];
    for (group, m, n, cula, tus) in cula_series {
        g.extend(with_cula(&cula, &tus, |i| {
            Point::new(group, DeleteRows, m, n, 0, 20 + 20 * i)
        }));
    }

    // RR-comp (the seeds' composite and three-stream row removal): m = 5000, p = 50,
    // n = 1000..4000.
    let comp = [1.001, 1.116, 1.244, 1.363];
    let streams = [1.441, 1.583, 1.762, 2.048];
    for i in 0..4 {
        g.push(
            Point::new("RR-comp", DeleteRows, 5000, 1000 * (i + 1), 0, 50).extra(Extra::Comp {
                composite_s: comp[i],
                streams_s: streams[i],
            }),
        );
    }
    g
}

/// ACC: the accuracy of four updates at m = 4000, n = 2000, k0 = 0, p = 100..900
/// step 200, with the seeds' GPU figures (f32).
#[allow(clippy::type_complexity)]
fn accuracy_points() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    let acc: [(Kind, [f64; 5], Option<[f64; 5]>, Option<[f64; 5]>); 4] = [
        (InsertRows, [2e-6, 2e-6, 2e-6, 1e-6, 3e-6], None, None),
        (DeleteCols, [3e-6, 3e-6, 2e-6, 2e-6, 2e-6], None, None),
        (
            DeleteRows,
            [5e-6, 4e-6, 5e-6, 6e-6, 6e-6],
            Some([2.34e-4, 3.39e-4, 3.64e-4, 3.89e-4, 4.70e-4]),
            Some([1.39e-4, 3.74e-4, 5.81e-4, 7.33e-4, 9.02e-4]),
        ),
        (
            InsertCols,
            [3e-6, 5e-6, 6e-6, 6e-6, 7e-6],
            Some([2.42e-4, 3.67e-4, 5.00e-4, 4.79e-4, 5.64e-4]),
            Some([9.5e-5, 1.56e-4, 2.02e-4, 2.34e-4, 2.51e-4]),
        ),
    ];
    for (kind, ex, eq, ea) in acc {
        for i in 0..5 {
            g.push(
                Point::new("ACC", kind, 4000, 2000, 0, 100 + 200 * i).extra(Extra::Acc {
                    e_x: ex[i],
                    e_q: eq.map(|v| v[i]),
                    e_a: ea.map(|v| v[i]),
                }),
            );
        }
    }
    g
}

/// R1: two rank-one points (no seed figure: the seeds have no rank-one experiment),
/// the small one with the CPU columns.
fn rank_one_points() -> Vec<Point> {
    vec![
        Point::new("R1", Kind::RankOne, 8000, 3000, 0, 1),
        Point::new("R1", Kind::RankOne, 2000, 1000, 0, 1).cpu(),
    ]
}

/// A series of five points: group, m, n, and the seeds' CULA and TUS seconds at
/// p = 20..100.
type CulaSeries = (&'static str, usize, usize, [f64; 5], [f64; 5]);

/// The points `point(i)`, i = 0, 1, …, each with the seeds' CULA and TUS seconds
/// `cula[i]` and `tus[i]`.
fn with_cula<'a>(
    cula: &'a [f64],
    tus: &'a [f64],
    point: impl Fn(usize) -> Point + 'a,
) -> impl Iterator<Item = Point> + 'a {
    cula.iter()
        .zip(tus)
        .enumerate()
        .map(move |(i, (&c, &t))| point(i).cula(c, t))
}

/// The required speed-up over refactorisation (a) at a point (the bar): 50× for
/// column deletion with k0 ≥ n/2 and for the rank-one update, 10× where the
/// update changes at most a tenth of the matrix, otherwise 1×.
pub(super) fn required_speedup(pt: &Point) -> f64 {
    match pt.kind {
        Kind::RankOne => 50.0,
        Kind::DeleteCols if 2 * pt.k0 >= pt.n => 50.0,
        Kind::InsertCols | Kind::DeleteCols if 10 * pt.p <= pt.n => 10.0,
        Kind::InsertRows | Kind::DeleteRows if 10 * pt.p <= pt.m => 10.0,
        _ => 1.0,
    }
}

/// Why [`required_speedup`] asks what it does (its cases, in its order).
pub(super) fn bar_reason(p: &Point) -> &'static str {
    match p.kind {
        Kind::RankOne => "rank-one",
        Kind::DeleteCols if 2 * p.k0 >= p.n => "k0 ≥ n/2",
        Kind::InsertCols | Kind::DeleteCols if 10 * p.p <= p.n => "p ≤ n/10",
        Kind::InsertRows | Kind::DeleteRows if 10 * p.p <= p.m => "p ≤ m/10",
        _ => "elsewhere",
    }
}

/// Whether the CPU bar (GPU ≥ 50× the serial update) applies here.
pub(super) fn cpu_bar_applies(pt: &Point) -> bool {
    matches!(pt.group, "RR-seq" | "AC-k3" | "AR-p")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid has every point of the seeds' grids, each valid for its update.
    #[test]
    fn full_grid_covers_the_seeds_grids() {
        let g = full_grid();
        let count = |grp: &str| g.iter().filter(|p| p.group == grp).count();
        let want = [
            ("BS", 18),
            ("AC-k3", 21),
            ("AC-k6", 39),
            ("AC-stage", 2),
            ("AC-p", 16),
            ("RC-k", 20),
            ("RC-m", 7),
            ("AR-p", 24),
            ("AR-n", 14),
            ("AR-m", 7),
            ("RR-seq", 15),
            ("RR-n", 15),
            ("RR-m", 15),
            ("RR-comp", 4),
            ("ACC", 20),
            ("R1", 2),
        ];
        for (grp, n) in want {
            assert_eq!(count(grp), n, "{grp}");
            assert!(GROUPS.contains(&grp));
        }
        assert_eq!(g.len(), want.iter().map(|w| w.1).sum::<usize>());
        for p in &g {
            match p.kind {
                Kind::InsertCols => assert!(p.k0 <= p.n),
                Kind::DeleteCols => assert!(p.k0 + p.p <= p.n),
                Kind::InsertRows => assert!(p.k0 <= p.m),
                Kind::DeleteRows => assert!(p.k0 + p.p <= p.m && p.m - p.p >= p.n),
                Kind::RankOne => assert_eq!(p.p, 1),
            }
            for s in [p.seed_cula, p.seed_seq].into_iter().flatten() {
                assert!(s.is_finite() && s > 0.0, "{p:?}");
            }
        }
        // spot checks against the seeds' tables
        let find = |grp: &str, m: usize, n: usize, k0: usize, p: usize| {
            *g.iter()
                .find(|x| x.group == grp && x.m == m && x.n == n && x.k0 == k0 && x.p == p)
                .unwrap_or_else(|| panic!("{grp} {m} {n} {k0} {p}"))
        };
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-9 * b;
        assert!(close(
            find("AC-k6", 8000, 6000, 6000, 200).seed_cula,
            1.797 / 0.503
        ));
        assert!(close(
            find("RC-k", 6000, 3000, 2500, 500).seed_cula,
            0.565 / 0.042
        ));
        assert!(close(
            find("RC-k", 6000, 3000, 2800, 200).seed_seq,
            0.024 / 0.048
        ));
        assert!(close(
            find("AR-p", 8000, 3000, 0, 1500).seed_seq,
            41.810 / 0.995
        ));
        assert!(close(
            find("RR-m", 16000, 6000, 0, 100).seed_cula,
            4.116 / 15.335
        ));
        assert!(close(
            find("AC-p", 8000, 3000, 2980, 700).seed_seq,
            133.165 / 1.326
        ));
        assert!(find("AC-k3", 8000, 3000, 0, 200).seed_seq.is_none());
        let bs1 = g
            .iter()
            .find(|x| x.group == "BS" && x.nb == Some(1))
            .unwrap();
        assert!(bs1.seed_seq.is_none());
        assert_eq!(
            find("RR-comp", 5000, 3000, 0, 50).extra,
            Extra::Comp {
                composite_s: 1.244,
                streams_s: 1.762
            }
        );
    }

    #[test]
    fn bar_thresholds_follow_the_required_speedups() {
        let g = full_grid();
        let find = |grp: &str, k0: usize, p: usize| {
            *g.iter()
                .find(|x| x.group == grp && x.k0 == k0 && x.p == p)
                .unwrap()
        };
        assert_eq!(required_speedup(&find("RC-k", 1500, 100)), 50.0);
        assert_eq!(required_speedup(&find("RC-k", 0, 100)), 10.0);
        assert_eq!(required_speedup(&find("RC-k", 0, 500)), 1.0);
        assert_eq!(required_speedup(&find("AC-k3", 0, 200)), 10.0);
        assert_eq!(required_speedup(&find("AR-p", 0, 1500)), 1.0);
        assert_eq!(required_speedup(&find("RR-m", 0, 20)), 10.0);
        assert_eq!(required_speedup(&find("R1", 0, 1)), 50.0);
        assert_eq!(bar_reason(&find("R1", 0, 1)), "rank-one");
        assert_eq!(bar_reason(&find("AR-p", 0, 1500)), "elsewhere");
    }
}
