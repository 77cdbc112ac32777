# Labels of single GoogleTest tests, which gtest_discover_tests cannot give (it gives every test of a
# binary the same properties, and flattens a list of labels). ctest runs this file after the tests
# are discovered (TEST_INCLUDE_FILES in tests/CMakeLists.txt), with each binary's tests in
# <binary>_TESTS. A test named here that no binary has fails the run as `test_labels_stale`.
#
#   one_build  the test checks code that no LibTorch difference touches: scripts/test runs it in its
#              first build only. Whole binaries are labelled where they are declared (the Slurm
#              tests, wavetrain_core_tests, hydra_differential, layering); these are the single
#              tests of wavetrain_tests that qualify.
#   slow       over 10 s on 2 cores (ctest --parallel 2, docs/build.md); each with why it cannot be
#              shorter without losing what it checks. Slow tests still run in CI: `ctest -LE slow`
#              leaves them out of a quick local run.

# The sweep launcher, its stop protocol, run locks and resume bookkeeping, and the config checks
# that refuse a run before it starts: processes and files, around a toy task. What LibTorch does in
# them (checkpoints, bitwise resume) is checked in both builds by CliTrain, Checkpoint, Trainer and
# the three tests kept out of this list (a stop signal's resumed run, a resumed stopped job, a kill
# inside a save).
set(_one_build
  SweepCli.AStopRequestIsHonouredMidEpochAtAnEpochsEndAndNotAtTheLastStep
  SweepCli.AshaFindsTheGridsBestWithAFractionOfItsStepsAndPromotedTrialsContinueTheirCurves
  SweepCli.BadSweepsAreRefusedBeforeAnythingIsWrittenOrSubmitted
  SweepCli.RandomSearchDrawsTheSameTrialsForTheSameSeed
  SweepCli.ReportComparesRunDirectoriesAndSweepDirectories
  Reliability.AFailedCheckpointWriteIsInTheLogAndLeavesNoTemporary
  Reliability.AKilledSweepResumesEachJobExactlyOnce
  Reliability.ASweepStoppedBySigtermStopsItsJobsInOrder
  Reliability.ATakenRunDirIsAnnouncedFirst
  Reliability.AtomicTemporariesAreRecognisedByTheirExactNaming
  Reliability.ConfigFileKeysThatNothingReadsAreRefused
  Reliability.NonFiniteRatesAndUncountableStepsAreRefused
  Reliability.RanksDieWithTheirLauncher
  Reliability.ResumeWaitsForALiveJobAndKeepsWhatItFinished
  Reliability.TheLaunchersVariableIsObeyedOnlyWhenTheLauncherIsGone
  # The Slurm launcher over simulated hosts: the engines' training across hosts is checked in both
  # builds by the other MultiNode tests.
  MultiNode.ASlurmJobOverTwoHostsTrainsAsOneRankOnEach
)

# name|seconds measured|why it takes over 10 s. The seconds are its ctest COST: a test with a cost
# starts before the others, so that the longest do not start last and stretch the run.
set(_slow
  "Slurm.AJobPastItsTimeLimitIsRequeuedAndEndsAsAnUninterruptedRun|76|Slurm's time limits are whole minutes: the job has to run into a 1-minute limit before it is requeued"
  "Slurm.AshaOfSixteenTrialsAccountsForEveryTrial|39|16 trials and their promotions as Slurm array jobs, each started by slurmd and seen through squeue/sacct polling"
  "Slurm.TwoTasksPerNodeTrainAsTwoDataParallelRanks|26|two ranks started by srun in one Slurm job step: 5 s to 26 s seen, most of it slurmd launching the step"
  "Slurm.AKilledLauncherLosesNoJobAndResumeRunsNoneTwice|17|waits for the killed launcher's jobs to finish under Slurm before resuming the sweep"
  "SweepCli.AStopRequestIsHonouredMidEpochAtAnEpochsEndAndNotAtTheLastStep|15|three runs, each stopped at a different point of its epochs and then resumed"
  "SweepCli.AshaFindsTheGridsBestWithAFractionOfItsStepsAndPromotedTrialsContinueTheirCurves|12|a 9-point grid in full against ASHA over the same grid: 2 sweeps of 9 runs"
  "AmpModels.NeuralAmpModelersOwnLoaderGetsTheSameOutput|13|starts Python with neural-amp-modeler, whose import (PyTorch Lightning with it) takes most of the time"
  "CliAmp.TrainsA2AndOtherActivations|13|two models trained, exported, played from the file and from the checkpoint: 7 runs of the binary"
  "CliAmp.TrainExportImportInfer|11|train, export, import, infer and compare: the whole amp command line in one test"
  "AmpNamFiles.ImportAndExportKeepEveryExample|13|every example file of the NAM core through import and export, each model built and played"
  "AsrTrain.AFewStepsLowerTheLossAndAKilledRunResumesBitwise|11|a transducer trained uninterrupted and again killed and resumed, to compare the two bitwise"
  "MultiNode.TheAmpTaskOnTwoHostsReachesOneHostsWeightsAlsoOverLinksThatLoseOnePercent|23|four amp trainings (one host, 2 x 1, 2 x 2, 2 x 1 over lossy links), each rank starting its own process"
  "MultiNodeInterrupted.ACutLinkEndsTheRunWithinTheTimeoutAndTheResumeEndsAsAnUninterruptedRun|16|a cut link is only noticed when the 5 s collective timeout runs out, then a resumed and an uninterrupted 600-step run"
  "MultiNodeInterrupted.AKilledRankEndsTheRunWithinTheTimeoutAndTheResumeEndsAsAnUninterruptedRun|11|a resumed and an uninterrupted 600-step run on two hosts after the kill"
)

set(_known "")
foreach(_binary wavetrain_tests wavetrain_slurm_tests wavetrain_core_tests)
  list(APPEND _known ${${_binary}_TESTS})
endforeach()
set(_stale "")
# (list(FIND), not if(IN_LIST): ctest reads this file without the project's policies.)
foreach(_test IN LISTS _one_build)
  list(FIND _known ${_test} _at)
  if(_at GREATER -1)
    set_tests_properties(${_test} PROPERTIES LABELS one_build)
  elseif(DEFINED wavetrain_tests_TESTS)
    list(APPEND _stale ${_test})
  endif()
endforeach()
foreach(_entry IN LISTS _slow)
  string(REPLACE "|" ";" _parts "${_entry}")
  list(GET _parts 0 _test)
  list(GET _parts 1 _seconds)
  list(FIND _known ${_test} _at)
  if(_at EQUAL -1)
    # A binary that was not built (scripts/test's second build leaves out the Slurm tests) has no list.
    string(REGEX REPLACE "\\..*" "" _suite "${_test}")
    if(NOT (_suite STREQUAL "Slurm" AND NOT DEFINED wavetrain_slurm_tests_TESTS))
      list(APPEND _stale ${_test})
    endif()
    continue()
  endif()
  list(FIND _one_build ${_test} _in_one_build)
  if(_test MATCHES "^Slurm\\.")
    set_tests_properties(${_test} PROPERTIES LABELS "slurm;slow" COST ${_seconds})
  elseif(_in_one_build GREATER -1)
    set_tests_properties(${_test} PROPERTIES LABELS "one_build;slow" COST ${_seconds})
  else()
    set_tests_properties(${_test} PROPERTIES LABELS slow COST ${_seconds})
  endif()
endforeach()
if(_stale)
  add_test(test_labels_stale sh -c "echo 'tests/test_labels.cmake names tests that do not exist: ${_stale}'; exit 1")
endif()
# scripts/test's second build does not build the binaries whose tests run once; their placeholders
# (gtest_discover_tests' <binary>_NOT_BUILT, which fail) take the binaries' labels.
if(NOT DEFINED wavetrain_core_tests_TESTS)
  set_tests_properties(wavetrain_core_tests_NOT_BUILT PROPERTIES LABELS one_build)
endif()
if(NOT DEFINED wavetrain_slurm_tests_TESTS)
  set_tests_properties(wavetrain_slurm_tests_NOT_BUILT PROPERTIES LABELS slurm)
endif()
